// How much of a native-cluster step's communication ran while the same device computed: from one traced run's
// per-instruction timings (NativeClusterHandle.timings, [start0, end0, start1, end1, ...] in seconds), per
// device and summed over devices. Pure: intervals in, lengths out.
//
//   commSeconds    length of the union of the device's communication intervals (instructions on the comm
//                  stream whose op is a collective or point-to-point `comm.*`; the small kernels that also
//                  run on that stream, e.g. fsm_add_inplace after a reduce-scatter, are not communication);
//   computeSeconds length of the union of its compute-stream instruction intervals;
//   hiddenSeconds  length of (comm union) ∩ (compute union): communication the compute stream overlapped;
//   hiddenFraction hiddenSeconds / commSeconds (0 when there is no communication).
//
// A comm interval includes the time a collective or recv waits for its peers, so communication that is
// "exposed" can be waiting on another device rather than moving bytes.
import { COMM, COMPUTE, type DeviceProgram } from "../lower/device-program.js";

export interface Overlap {
  readonly commSeconds: number;
  readonly hiddenSeconds: number;
  readonly hiddenFraction: number;
  readonly computeSeconds: number;
}

export type Interval = readonly [number, number];

/** The union of intervals as a sorted list of disjoint ones (empty and reversed intervals dropped). */
export function unionIntervals(intervals: readonly Interval[]): Interval[] {
  const sorted = intervals.filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const out: [number, number][] = [];
  for (const [a, b] of sorted) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

const totalLength = (disjoint: readonly Interval[]): number => disjoint.reduce((n, [a, b]) => n + (b - a), 0);

/** Length of the intersection of two sorted lists of disjoint intervals. */
function intersectionLength(x: readonly Interval[], y: readonly Interval[]): number {
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < x.length && j < y.length) {
    const lo = Math.max(x[i]![0], y[j]![0]);
    const hi = Math.min(x[i]![1], y[j]![1]);
    if (hi > lo) n += hi - lo;
    if (x[i]![1] < y[j]![1]) i++;
    else j++;
  }
  return n;
}

/** One device's overlap in one traced step. `timings` has two entries per instruction of `program`. */
export function overlapFromTimings(program: DeviceProgram, timings: Float64Array): Overlap {
  const n = program.instructions.length;
  if (timings.length !== 2 * n) throw new Error(`overlapFromTimings: ${timings.length} timings for ${n} instructions (want ${2 * n})`);
  const comm: Interval[] = [];
  const compute: Interval[] = [];
  program.instructions.forEach((ins, i) => {
    const interval: Interval = [timings[2 * i]!, timings[2 * i + 1]!];
    if (ins.stream === COMM && ins.op.startsWith("comm.")) comm.push(interval);
    else if (ins.stream === COMPUTE) compute.push(interval);
  });
  return overlapOfIntervals(comm, compute);
}

/** The overlap of any communication and compute intervals (e.g. a plan's predicted action times). */
export function overlapOfIntervals(comm: readonly Interval[], compute: readonly Interval[]): Overlap {
  const commUnion = unionIntervals(comm);
  const computeUnion = unionIntervals(compute);
  const commSeconds = totalLength(commUnion);
  const hiddenSeconds = intersectionLength(commUnion, computeUnion);
  return { commSeconds, hiddenSeconds, hiddenFraction: commSeconds > 0 ? hiddenSeconds / commSeconds : 0, computeSeconds: totalLength(computeUnion) };
}

/** Every device's overlap summed (hiddenFraction: the summed hidden over the summed communication time). */
export function clusterOverlap(devices: readonly DeviceProgram[], timingsPerDevice: readonly Float64Array[]): Overlap {
  if (devices.length !== timingsPerDevice.length) throw new Error(`clusterOverlap: ${devices.length} devices but ${timingsPerDevice.length} timings`);
  let commSeconds = 0;
  let hiddenSeconds = 0;
  let computeSeconds = 0;
  devices.forEach((d, i) => {
    const o = overlapFromTimings(d, timingsPerDevice[i]!);
    commSeconds += o.commSeconds;
    hiddenSeconds += o.hiddenSeconds;
    computeSeconds += o.computeSeconds;
  });
  return { commSeconds, hiddenSeconds, hiddenFraction: commSeconds > 0 ? hiddenSeconds / commSeconds : 0, computeSeconds };
}
