// The parts of `fsm calibrate` that do not depend on the model: the in-process communicator's collectives and
// the hand-off each collective of a step pays, both measured in the native executor exactly as a run drives it
// (createNativeCluster: a compute and a communication thread per device, or the devices taking turns on host
// threads, as hostThreadsFor has a run of that many devices on this machine run them).
//
//   collectives: for each kind, group size n and a few buffer sizes M (bytes as src/cost/collectives.ts
//     counts them: the gathered output of an all-gather, the unreduced input of a reduce-scatter), n devices
//     run K back-to-back collectives on their communication streams; one collective takes the span from the
//     first start to the last end over K. The median of several rounds per size, then a least-squares fit of
//     α + β·M per (kind, n). send/recv: two devices ping-pong K messages; one message is the span over 2K.
//   handoff: back-to-back collectives keep the communication threads awake; in a step each collective waits
//     for a compute instruction's result and a compute instruction waits for its result, a thread woken each
//     way. Two devices alternate a one-element copy and a 4 KiB all-reduce reading it, K times; an iteration
//     less the copy and the back-to-back all-reduce is the hand-off a collective pays in a step (near nothing
//     where devices take turns on host threads).
import { COMM, COMPUTE, DeviceBuilder, type DeviceProgram } from "../lower/device-program.js";
import { createNativeCluster } from "../native/binding.js";
import type { CalibratedCollective, CollectiveFit } from "../cost/calibration.js";
import { hostThreadsFor } from "./world.js";

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Buffer sizes measured per collective, bytes (each rounded to whole elements per rank). */
export const COLLECTIVE_BYTES = [4096, 65536, 1 << 20, 4 << 20] as const;

const NATIVE_OP: Record<Exclude<CalibratedCollective, "send_recv">, string> = {
  all_reduce: "comm.allReduce",
  all_gather: "comm.allGather",
  reduce_scatter: "comm.reduceScatter",
  broadcast: "comm.broadcast",
  reduce: "comm.reduce",
};

function collectivePrograms(kind: CalibratedCollective, n: number, numel: number, k: number): DeviceProgram[] {
  const group = Array.from({ length: n }, (_, i) => i);
  return group.map((rank) => {
    const b = new DeviceBuilder();
    if (kind === "send_recv") {
      const s = b.pin(b.slot([numel]));
      const peer = 1 - rank;
      for (let i = 0; i < k; i++) {
        const order = rank === 0 ? ["comm.send", "comm.recv"] : ["comm.recv", "comm.send"];
        for (const op of order) b.emit(COMM, op, op === "comm.send" ? [s] : [], op === "comm.send" ? [] : [s], { peer, tag: i }, "calibrate");
      }
      return b.finish();
    }
    const whole = b.pin(b.slot([numel]));
    const part = b.pin(b.slot([numel / n]));
    const [ins, outs] = kind === "all_gather" ? [[part], [whole]] : kind === "reduce_scatter" ? [[whole], [part]] : [[whole], [whole]];
    const attrs: Record<string, number | readonly number[]> = kind === "broadcast" || kind === "reduce" ? { group, root: 0 } : { group };
    for (let i = 0; i < k; i++) b.emit(COMM, NATIVE_OP[kind], ins, outs, attrs, "calibrate");
    return b.finish();
  });
}

/** Seconds from the first instruction's start to the last one's end over every device of the last run. */
function span(cluster: ReturnType<typeof createNativeCluster>, devices: number): number {
  let first = Infinity;
  let last = -Infinity;
  for (let d = 0; d < devices; d++) {
    const t = cluster.timings(d);
    for (let i = 0; i < t.length; i += 2) {
      first = Math.min(first, t[i]!);
      last = Math.max(last, t[i + 1]!);
    }
  }
  return last - first;
}

/** Least squares of seconds = α + β·bytes in relative error (each sample weighted 1/seconds², so a 4 KiB
 *  message's time counts as much as a 4 MiB one's), both kept non-negative. */
export function fitAlphaBeta(samples: readonly { bytes: number; seconds: number }[]): { latencySeconds: number; secondsPerByte: number } {
  const w = samples.map((p) => (p.seconds > 0 ? 1 / (p.seconds * p.seconds) : 0));
  const sum = (f: (p: { bytes: number; seconds: number }, i: number) => number): number => samples.reduce((s, p, i) => s + f(p, i), 0);
  const [sw, sx, sy, sxx, sxy] = [sum((_, i) => w[i]!), sum((p, i) => w[i]! * p.bytes), sum((p, i) => w[i]! * p.seconds), sum((p, i) => w[i]! * p.bytes * p.bytes), sum((p, i) => w[i]! * p.bytes * p.seconds)];
  const det = sw * sxx - sx * sx;
  let beta = det > 0 ? (sw * sxy - sx * sy) / det : 0;
  let alpha = sw > 0 ? (sy - beta * sx) / sw : 0;
  if (beta < 0) [beta, alpha] = [0, sw > 0 ? sy / sw : 0];
  if (alpha < 0) [alpha, beta] = [0, sxx > 0 ? sxy / sxx : 0];
  return { latencySeconds: alpha, secondsPerByte: beta };
}

/** Measures every collective kind over each group size in `groups` (send/recv: between two devices). */
export async function measureCollectives(groups: readonly number[], rounds: number, onProgress?: (what: string) => void): Promise<CollectiveFit[]> {
  const fits: CollectiveFit[] = [];
  const kinds: CalibratedCollective[] = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send_recv"];
  for (const kind of kinds) {
    for (const n of kind === "send_recv" ? [2] : groups) {
      if (n < 2) continue;
      onProgress?.(`${kind} over ${n} devices`);
      const samples: { bytes: number; seconds: number }[] = [];
      for (const target of COLLECTIVE_BYTES) {
        const numel = n * Math.max(1, Math.round(target / 4 / n));
        const k = Math.max(2, Math.min(20, Math.round((8 << 20) / (numel * 4))));
        const cluster = createNativeCluster({ devices: collectivePrograms(kind, n, numel, k), blasThreads: 1, timeoutSeconds: 60, hostThreads: hostThreadsFor(n) });
        for (let r = 0; r < 3; r++) await cluster.run(false);
        const times: number[] = [];
        for (let r = 0; r < rounds; r++) {
          await cluster.run(true);
          times.push(span(cluster, n) / (kind === "send_recv" ? 2 * k : k));
        }
        samples.push({ bytes: numel * 4, seconds: median(times) });
      }
      fits.push({ kind, ranks: n, ...fitAlphaBeta(samples), samples });
    }
  }
  return fits;
}

/** The cost of a collective's hand-offs between a device's compute and communication threads (see above). */
export async function measureHandoff(rounds: number, hotAllReduce: (bytes: number) => number): Promise<number> {
  const k = 50;
  const numel = 1024;
  const b = new DeviceBuilder();
  const x = b.pin(b.slot([numel]));
  const y = b.pin(b.slot([numel]));
  for (let i = 0; i < k; i++) {
    b.emit(COMPUTE, "fsm_copy", [x], [y], {}, "calibrate", { inPlace: true });
    b.emit(COMM, "comm.allReduce", [y], [y], { group: [0, 1] }, "calibrate");
    b.emit(COMPUTE, "fsm_copy", [y], [x], {}, "calibrate", { inPlace: true });
  }
  const program = b.finish();
  const cluster = createNativeCluster({ devices: [program, program], blasThreads: 1, timeoutSeconds: 60, hostThreads: hostThreadsFor(2) });
  for (let r = 0; r < 10; r++) await cluster.run(false);
  const perIteration: number[] = [];
  const copies: number[] = [];
  for (let r = 0; r < rounds; r++) {
    await cluster.run(true);
    perIteration.push(span(cluster, 2) / k);
    for (let d = 0; d < 2; d++) {
      const t = cluster.timings(d);
      for (let i = 0; i < program.instructions.length; i++) if (program.instructions[i]!.stream === COMPUTE) copies.push(t[2 * i + 1]! - t[2 * i]!);
    }
  }
  return Math.max(0, median(perIteration) - 2 * median(copies) - hotAllReduce(numel * 4));
}
