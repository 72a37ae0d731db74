// Which device kind `fsm run` runs a plan's devices on: what the user asked for (--device), else CUDA GPUs
// when the plan was compiled for a GPU profile and this machine has one, else CPU virtual devices — with a
// note saying why when a GPU plan runs on the CPU. Asking for cuda where there is none is an error that says
// what is missing (no GPU, or an addon built without nvcc), never a crash.
import { getProfile } from "../cost/cluster.js";
import { nativeBuildInfo, nativeGpuKind } from "../native/binding.js";
import type { Plan } from "../plan/plan.js";

export const DEVICE_KINDS = ["cpu", "cuda", "simt"] as const;
export type DeviceKind = (typeof DEVICE_KINDS)[number];

export interface DeviceChoice {
  readonly kind: DeviceKind;
  /** Why the choice differs from what the plan's profile suggests (a GPU plan on the CPU). */
  readonly note?: string;
}

export class DeviceChoiceError extends Error {}

/** Why this machine cannot run the cuda kind, or undefined when it can. */
export function cudaUnavailable(): string | undefined {
  if (nativeBuildInfo().cuda === null) {
    return "this fsm was built without CUDA (nvcc was not found when the addon was built: install the CUDA toolkit, then npm run build:native)";
  }
  const gpus = nativeGpuKind("cuda");
  return gpus === null || gpus.devices === 0 ? (gpus?.none ?? "no CUDA device") : undefined;
}

export function chooseDevice(plan: Plan, requested?: DeviceKind): DeviceChoice {
  if (requested === "cuda") {
    const why = cudaUnavailable();
    if (why !== undefined) throw new DeviceChoiceError(`--device cuda: ${why}`);
    return { kind: "cuda" };
  }
  if (requested !== undefined) return { kind: requested };
  let gpuPlan = false;
  try {
    gpuPlan = getProfile(plan.cluster.profile).kind === "cuda";
  } catch {
    // a profile this fsm does not know: run where every plan runs
  }
  if (!gpuPlan) return { kind: "cpu" };
  const why = cudaUnavailable();
  if (why === undefined) return { kind: "cuda" };
  return { kind: "cpu", note: `the plan is for ${plan.cluster.profile} GPUs, but here: ${why}; running on CPU virtual devices` };
}
