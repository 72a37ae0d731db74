// A plan trained on a device kind against the same plan on CPU virtual devices: the loss of every step and
// every parameter after the last, as relative errors. The GPU check runs it on cuda (bench/gpu/check-parity.ts);
// the tests run it on simt (the CUDA device's code emulated), so the check itself is exercised in CI.
import type { Plan } from "../../src/plan/plan.js";
import type { DeviceKind } from "../../src/runtime/device-choice.js";
import { runPlan } from "../../src/runtime/run-loop.js";

export interface Trained {
  readonly losses: number[];
  readonly params: Map<string, Float32Array>;
  readonly stepSeconds: number[];
}

export async function trainOn(plan: Plan, steps: number, device: DeviceKind): Promise<Trained> {
  const out: Trained = { losses: [], params: new Map(), stepSeconds: [] };
  await runPlan(plan, {
    steps,
    engine: "native",
    device,
    onStep: (r) => {
      out.losses.push(r.loss);
      out.stepSeconds.push(r.seconds);
    },
    onDone: (e) => {
      for (const p of plan.graph.params) out.params.set(p.name, e.param(p.name));
    },
  });
  return out;
}

export interface PlanParity {
  /** Per step: |loss − reference| / |reference|. */
  readonly lossErrors: number[];
  /** The worst parameter element: |x − reference| / (|reference| + 1e-3·rms(reference)) over all parameters. */
  readonly worstParamError: number;
  readonly worstParam: string;
  readonly ok: boolean;
}

/** `device`'s run of `plan` against cpu's, passing at relative tolerance `rtol` (losses and parameters). */
export async function planParity(plan: Plan, steps: number, device: DeviceKind, rtol = 1e-4): Promise<PlanParity> {
  const ref = await trainOn(plan, steps, "cpu");
  const got = await trainOn(plan, steps, device);
  const lossErrors = ref.losses.map((l, i) => Math.abs((got.losses[i] ?? Number.NaN) - l) / Math.abs(l));
  let worstParamError = 0;
  let worstParam = "";
  for (const [name, want] of ref.params) {
    const have = got.params.get(name)!;
    let s = 0;
    for (const v of want) s += v * v;
    const floor = 1e-3 * Math.sqrt(s / want.length);
    for (let k = 0; k < want.length; k++) {
      const e = Math.abs(have[k]! - want[k]!) / (Math.abs(want[k]!) + floor);
      if (!(e <= worstParamError)) {
        worstParamError = e;
        worstParam = name;
      }
    }
  }
  const ok = lossErrors.every((e) => e <= rtol) && worstParamError <= 10 * rtol;
  return { lossErrors, worstParamError, worstParam, ok };
}
