// Where a run's CUDA devices sit and how they talk: this process's plan devices over the machine's GPUs (the
// first one after the GPUs of the processes before it on this machine — mpirun's local rank), and the
// communicator between them. NCCL allows one rank per GPU, so NCCL carries the collectives when every device
// of this process has a GPU of its own (several processes, or several GPUs in one); plan devices sharing one
// GPU (a one-GPU machine running a 2-device plan) talk through the in-process communicator, staged through
// host memory.
import { nativeGpuKind, type NativeCommunicatorKind, type NativeDeviceKind } from "../native/binding.js";
import type { DeviceKind } from "./device-choice.js";

export class PlacementError extends Error {}

export interface Placement {
  readonly device?: NativeDeviceKind;
  readonly communicator?: NativeCommunicatorKind;
}

/** OMPI_COMM_WORLD_LOCAL_RANK, or torchrun's LOCAL_RANK: this process's place among those on its machine. */
function localProcess(env: NodeJS.ProcessEnv): number {
  const v = Number(env.OMPI_COMM_WORLD_LOCAL_RANK ?? env.SLURM_LOCALID ?? env.LOCAL_RANK ?? 0);
  return Number.isInteger(v) && v >= 0 ? v : 0;
}

/** `gpus`: the GPUs this machine has (asked of the driver when not given). */
export function placeDevices(device: DeviceKind, localDevices: number, processes: number, env: NodeJS.ProcessEnv = process.env, gpus?: number): Placement {
  if (device === "cpu") return processes > 1 ? { communicator: { kind: "mpi" } } : {};
  if (device === "simt") return { device: { kind: "simt" }, ...(processes > 1 && { communicator: { kind: "mpi" } }) };
  gpus ??= nativeGpuKind("cuda")?.devices ?? 0;
  const first = localProcess(env) * localDevices;
  const own = first + localDevices <= gpus;
  if (processes > 1 && !own) {
    throw new PlacementError(
      `this machine has ${gpus} GPU${gpus === 1 ? "" : "s"} but its processes need ${first + localDevices} (process ${localProcess(env)} runs ${localDevices} device${localDevices === 1 ? "" : "s"} from GPU ${first}): NCCL takes one device per GPU; start fewer processes per machine`,
    );
  }
  const cuda: NativeDeviceKind = { kind: "cuda", firstOrdinal: own ? first : 0 };
  if (processes > 1 || (localDevices > 1 && own)) return { device: cuda, communicator: { kind: "nccl" } };
  return { device: cuda };
}
