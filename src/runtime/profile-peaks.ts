// The peaks `fsm run --profile` compares each kernel with: this machine's fp32 GEMM rate and memory bandwidth,
// measured at startup (about a quarter of a second) the way the run's devices will see them — in the native
// executor, on as many devices of the run's kind at once as the run has here: CPU virtual devices each with
// the run's OpenBLAS threads (cluster-engine.ts shares the cores out the same way), or the run's GPUs (cuBLAS
// and a device-to-device copy, timed by the device's events; simt: the CUDA device's code emulated on the CPU). `fsm calibrate` stores per-op times, not peaks, so
// there is nothing stored to reuse; bench/gemm.ts measures the same sgemm on every core, outside the executor.
//
//   sgemm: a 512×512×512 matmul instruction (2·512³ FLOPs; its 1 MiB output zeroed first, as the executor
//          does for every kernel that does not update in place), repeated, on every device at once;
//   memory: a copy of 32 MiB between two slots of each device's arena (fsm_copy, marked in place so the
//          executor does not zero the destination first): 64 MiB read and written per copy.
//
// Each figure is one device's: the median instruction of a round, the best round of three (a shared machine's
// other work only slows a round down), averaged over the devices.
import { availableParallelism } from "node:os";
import { COMPUTE, DeviceBuilder, type DeviceProgram } from "../lower/device-program.js";
import { createNativeCluster } from "../native/binding.js";
import type { DeviceKind } from "./device-choice.js";
import { placeDevices } from "./gpu-placement.js";
import { processesHere } from "./world.js";

export interface Peaks {
  /** One device's fp32 sgemm rate (FLOP/s) while every device of the run computes at once. */
  readonly flopsPerSecond: number;
  /** One device's copy bandwidth (bytes read + written per second) while every device copies at once. */
  readonly bytesPerSecond: number;
  /** How many devices ran at once, of which kind, each with how many OpenBLAS threads (CPU), on how many cores. */
  readonly devices: number;
  readonly kind: DeviceKind;
  readonly blasThreads: number;
  readonly cores: number;
  /** What was measured, in words. */
  readonly method: string;
}

export const PEAK_GEMM_N = 512;
export const PEAK_COPY_BYTES = 32 * 2 ** 20;
const REPEATS = 5;
const ROUNDS = 3;

/** OpenBLAS threads per device in a run of `devices` devices in this process (cluster-engine.ts's rule). */
export function blasThreadsFor(devices: number): number {
  return Math.max(1, Math.floor(availableParallelism() / (devices * processesHere())));
}

function peakProgram(): { program: DeviceProgram; gemm: number[]; copy: number[] } {
  const b = new DeviceBuilder();
  const n = PEAK_GEMM_N;
  const [x, w, y] = [b.pin(b.slot([n, n])), b.pin(b.slot([n, n])), b.pin(b.slot([n, n]))];
  const count = PEAK_COPY_BYTES / 4;
  const [src, dst] = [b.pin(b.slot([count])), b.pin(b.slot([count]))];
  const gemm: number[] = [];
  const copy: number[] = [];
  // The operands are the arena's zeros: sgemm's speed does not depend on the values (no denormals in 0·0).
  for (let r = 0; r < REPEATS; r++) gemm.push(b.emit(COMPUTE, "matmul", [x, w], [y], {}, "peak"));
  for (let r = 0; r < REPEATS; r++) copy.push(b.emit(COMPUTE, "fsm_copy", [src], [dst], {}, "peak", { inPlace: true }));
  return { program: b.finish(), gemm, copy };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Measures the peaks on `devices` devices of `kind` running at once (the run's devices in this process, of
 *  `processes` on this machine's GPUs). */
export async function measurePeaks(devices: number, kind: DeviceKind = "cpu", processes = 1): Promise<Peaks> {
  if (!(Number.isInteger(devices) && devices >= 1)) throw new Error(`measurePeaks: devices must be a positive integer, got ${devices}`);
  const { program, gemm, copy } = peakProgram();
  const blasThreads = blasThreadsFor(devices);
  // The run's own GPUs (no communicator: the program has no collectives).
  const device = kind === "cpu" ? {} : { device: placeDevices(kind, devices, processes).device! };
  const cluster = createNativeCluster({ devices: Array.from({ length: devices }, () => program), blasThreads, timeoutSeconds: 60, ...device });
  const flops = 2 * PEAK_GEMM_N ** 3;
  const bytes = 2 * PEAK_COPY_BYTES;
  const best = Array.from({ length: devices }, () => ({ gemm: 0, copy: 0 }));
  await cluster.run(false); // first touches, thread start
  for (let round = 0; round < ROUNDS; round++) {
    await cluster.run(true);
    for (let d = 0; d < devices; d++) {
      const t = cluster.timings(d);
      const seconds = (list: readonly number[]): number => median(list.map((i) => t[2 * i + 1]! - t[2 * i]!));
      best[d]!.gemm = Math.max(best[d]!.gemm, flops / seconds(gemm));
      best[d]!.copy = Math.max(best[d]!.copy, bytes / seconds(copy));
    }
  }
  const mean = (f: (x: { gemm: number; copy: number }) => number): number => best.reduce((s, x) => s + f(x), 0) / devices;
  const cores = availableParallelism();
  const on = kind === "cpu" ? "" : ` ${kind}`;
  const at = devices === 1 ? `on 1${on} device` : `on each of ${devices}${on} devices at once`;
  const how = kind === "cpu" ? `${blasThreads} OpenBLAS thread${blasThreads === 1 ? "" : "s"}${devices === 1 ? "" : " each"}, ${cores} core${cores === 1 ? "" : "s"}` : kind === "cuda" ? "cuBLAS, timed by the device's events" : "the CUDA device's code emulated on the CPU";
  return {
    flopsPerSecond: mean((x) => x.gemm),
    bytesPerSecond: mean((x) => x.copy),
    devices,
    kind,
    blasThreads,
    cores,
    method: `measured now ${at} (${how}): sgemm ${PEAK_GEMM_N}×${PEAK_GEMM_N}×${PEAK_GEMM_N}, copy ${PEAK_COPY_BYTES / 2 ** 20} MiB`,
  };
}
