// What a version-2 calibration file (calibration.ts) adds to the pricing of a step on CPU virtual devices:
//
//   compute   An op measured on one device with one core (t₁) and with every core of the machine (t_C). A run
//             of N devices on C cores gives each device k = max(1, ⌊C/N⌋) OpenBLAS/kernel threads (the rule of
//             src/runtime/cluster-engine.ts), so an op takes t_k, interpolated linearly in 1/k between t₁ and
//             t_C (Amdahl's law through the two measurements), plus the executor's dispatch per instruction; and
//             when N > C the devices' threads share the cores, so everything a device computes runs N/C slower
//             (or as much slower as the calibration measured N devices computing at once: `contention`).
//   optimizer The update ops' measured time per byte of model state, times the stage's state bytes, slowed the
//             same way.
//   comm      Each collective kind and group size measured through the in-process communicator and fitted as
//             α + β·bytes; a group size not measured scales the nearest measured one as a ring would
//             ((n−1) steps of α, (n−1)/n of the bytes; all-reduce twice both; send/recv unchanged); plus the
//             hand-off each collective of a step pays between its device's compute and communication threads.
//   host      The run loop's whole step on N devices that compute nothing (interpolated linearly between the
//             measured device counts, the nearest one beyond them), to which the devices' makespan adds —
//             less the next batch's making, where the devices leave the main thread a core (below).
//
// A version-1 file has none of these: its op times are used as they are and nothing else changes. A version-2
// file's host step is read as calibration.ts converts it.
import type { Calibration, CalibrationEntry, CalibratedCollective, CollectiveFit } from "./calibration.js";
import type { Cluster } from "./cluster.js";
import { BLOCKING_STEP_LIMIT_SECONDS, hostThreadsOn } from "./host-policy.js";

/** How the cores of the machine are shared out among a run's devices. */
export interface CoreShare {
  /** Threads each device computes with. */
  readonly threads: number;
  /** How much slower each device computes than alone with `threads` threads (N/C when N > C, else 1). */
  readonly slowdown: number;
}

/** The share of N devices on C cores: ⌊C/N⌋ threads each (at least one), and N/C slower past C devices — or,
 *  where the calibration measured devices computing at once (`contention`), that slowdown: interpolated
 *  linearly between measured device counts, and beyond the last one grown in proportion to N. */
export function coreShare(cores: number, devices: number, contention?: readonly { readonly devices: number; readonly slowdown: number }[]): CoreShare {
  if (!(Number.isInteger(cores) && cores >= 1 && Number.isInteger(devices) && devices >= 1)) throw new Error(`internal: coreShare(${cores}, ${devices})`);
  const threads = Math.max(1, Math.floor(cores / devices));
  if (!contention || contention.length === 0) return { threads, slowdown: Math.max(1, devices / cores) };
  return { threads, slowdown: Math.max(1, interpolate(contention.map((c) => ({ devices: c.devices, seconds: c.slowdown })), devices, true)) };
}

/** An op's time with `threads` threads from its times with one thread and with all `cores`. */
export function threadedSeconds(oneThread: number, allCores: number, cores: number, threads: number): number {
  if (threads <= 1 || cores <= 1) return oneThread;
  if (threads >= cores) return allCores;
  return oneThread + (allCores - oneThread) * ((1 - 1 / threads) / (1 - 1 / cores));
}

/** Whether a calibration carries the version-2 terms. */
export function isFullCalibration(cal: Calibration | undefined): cal is Calibration & Required<Pick<Calibration, "cores" | "optimizer" | "host" | "collectives">> {
  return cal !== undefined && cal.cores !== undefined && cal.host !== undefined && cal.optimizer !== undefined && cal.collectives !== undefined;
}

/** The forward and backward seconds of a measured op on one device of the cluster (without the collectives a
 *  tensor-parallel op adds). */
export function calibratedOpSeconds(cluster: Cluster, entry: CalibrationEntry): { forward: number; backward: number } {
  const cal = cluster.calibration;
  if (!isFullCalibration(cal) || entry.allCores === undefined) return { forward: entry.forwardSeconds, backward: entry.backwardSeconds };
  const { threads, slowdown } = coreShare(cal.cores, cluster.devices, cal.contention);
  const dispatch = cal.host.instructionSeconds;
  const forward = threadedSeconds(entry.forwardSeconds, entry.allCores.forwardSeconds, cal.cores, threads) + dispatch;
  const backward = threadedSeconds(entry.backwardSeconds, entry.allCores.backwardSeconds, cal.cores, threads) + dispatch * (entry.backwardOps ?? 0);
  return { forward: forward * slowdown, backward: backward * slowdown };
}

/** Seconds of the optimizer step over `stateBytes` of model state on one device of the cluster, when the
 *  cluster's calibration measured it. */
export function calibratedOptimizerSeconds(cluster: Cluster, stateBytes: number): number | undefined {
  const cal = cluster.calibration;
  if (!isFullCalibration(cal) || cal.optimizer.stateBytes === 0) return undefined;
  const { threads, slowdown } = coreShare(cal.cores, cluster.devices, cal.contention);
  const o = cal.optimizer;
  const seconds = threadedSeconds(o.seconds, o.allCoresSeconds, cal.cores, threads) + o.ops * cal.host.instructionSeconds;
  return (seconds / o.stateBytes) * stateBytes * slowdown;
}

/** A step's host costs on the cluster (none without a version-2 calibration). */
export function hostStepSeconds(cluster: Cluster): HostStep {
  const cal = cluster.calibration;
  if (!isFullCalibration(cal)) return NO_HOST;
  return {
    empty: interpolate(cal.host.step, cluster.devices),
    hidden: leavesMainThreadACore(cal.cores, cluster.devices) ? (cal.host.batchSeconds ?? 0) : 0,
    ...(cal.host.blockingStep && { blocking: interpolate(cal.host.blockingStep, cluster.devices) }),
  };
}

/** Whether N devices leave the run loop's thread a core of its own while they run: where the executor gives
 *  each a thread per stream (hostThreadsOn: 2·N ≤ cores), they compute on at most N < cores threads. Where
 *  they take turns on as many host threads as the cores, the next batch's making takes a core they would use;
 *  measured on 2 cores, mlp's 2 and 4 devices stepped in the empty step plus their makespan, its 1 device in
 *  the empty step plus what of its makespan the batch did not hide. */
function leavesMainThreadACore(cores: number, devices: number): boolean {
  return hostThreadsOn(cores, devices) === 0;
}

/** What a step costs the host besides the programs: `empty`, the run loop's whole step on devices that compute
 *  nothing (its feeding, the executor's start and finish, the next batch made meanwhile, the losses); of it,
 *  `hidden` is time the devices' work can overlap (the batch's making, on a core of its own); `blocking`, the
 *  empty step taken on the loop's thread, the batch made after (nothing hidden). The run loop takes steps the
 *  way it measures faster (src/runtime/step-mode.ts), so a step takes the less of
 *  empty + max(0, makespan − hidden) and blocking + makespan (hostedStepSeconds). */
export interface HostStep {
  readonly empty: number;
  readonly hidden: number;
  readonly blocking?: number;
}
export const NO_HOST: HostStep = { empty: 0, hidden: 0 };

/** A step's time from its programs' makespan and the host's costs (HostStep): blocking only where the run
 *  loop would try it, an overlapped step within BLOCKING_STEP_LIMIT_SECONDS. */
export function hostedStepSeconds(host: HostStep, makespan: number): number {
  const overlapped = host.empty + Math.max(0, makespan - host.hidden);
  if (host.blocking === undefined || overlapped > BLOCKING_STEP_LIMIT_SECONDS) return overlapped;
  return Math.min(overlapped, host.blocking + makespan);
}

/** A value by device count, linear between measured counts, the nearest one's outside them (`grow`: beyond
 *  the last, in proportion to the device count). */
function interpolate(points: readonly { readonly devices: number; readonly seconds: number }[], devices: number, grow = false): number {
  const first = points[0]!;
  if (devices <= first.devices) return first.seconds;
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1]!, points[i]!];
    if (devices <= b.devices) return a.seconds + ((b.seconds - a.seconds) * (devices - a.devices)) / (b.devices - a.devices);
  }
  const last = points[points.length - 1]!;
  return grow ? (last.seconds * devices) / last.devices : last.seconds;
}

/** The calibrated time of a collective of `bytes` over `ranks` devices, if the calibration measured its kind. */
export function calibratedCollectiveSeconds(cal: Calibration, kind: CalibratedCollective, bytes: number, ranks: number): number | undefined {
  if (ranks <= 1) return 0;
  const fits = (cal.collectives ?? []).filter((c) => c.kind === kind);
  if (fits.length === 0) return undefined;
  // In a step, every collective also pays the hand-offs between its device's compute and communication threads.
  const handoff = cal.host?.handoffSeconds ?? 0;
  const exact = fits.find((c) => c.ranks === ranks);
  if (exact) return exact.latencySeconds + exact.secondsPerByte * bytes + handoff;
  // The nearest measured group size, scaled to this one as a ring scales.
  const near = fits.reduce((a, b) => (Math.abs(b.ranks - ranks) < Math.abs(a.ranks - ranks) ? b : a));
  const [alpha, beta] = ringScale(near, ranks);
  return near.latencySeconds * alpha + near.secondsPerByte * bytes * beta + handoff;
}

/** Factors on a measured fit's α and β taking it from its group size to `ranks`. */
function ringScale(fit: CollectiveFit, ranks: number): [number, number] {
  if (fit.kind === "send_recv") return [1, 1];
  const steps = (ranks - 1) / (fit.ranks - 1);
  const share = fit.kind === "broadcast" || fit.kind === "reduce" ? 1 : (ranks - 1) / ranks / ((fit.ranks - 1) / fit.ranks);
  return [steps, share];
}
