// `fsm calibrate`: this machine's times for a plan's shapes, in the calibration file format of
// src/cost/calibration.ts (version 3), so the cpu profile's predictions use measurements instead of roofline
// estimates. Everything is timed in the native executor, as `fsm run` drives it:
//   - ops: for every micro-batch size the plan search may pick (each divisor of the batch), one micro-batch of
//     the training graph (forward, backward, optimizer) lowered as one device's compute stream, with realistic
//     operands (the synthetic data, the initial weights), run `repeats` times traced on one device with one
//     thread and with every core (interleaved), each instruction's median kept. A forward op's backward time
//     is the sum of the gradient ops derived from it; instances of one op and shape (repeated layers) share
//     one entry, their median. The optimizer's update ops give its time per byte of model state.
//   - contention: the same program run on 1..D devices at once, one thread each: how much slower each device
//     computes when the devices share the machine's cores (N/C past the core count on a quiet machine; more
//     where other work shares them too);
//   - host: the executor's dispatch between instructions (the traced span less the instructions' times), and
//     for each device count the run loop's whole step on devices that compute nothing (calibrate-loop.ts:
//     feeding the batch, starting and finishing the run, the next batch made meanwhile, the losses read);
//   - collectives: the in-process communicator's α and β per kind and group size, and the hand-off between a
//     device's compute and communication threads each collective of a step pays (calibrate-comm.ts).
import { availableParallelism, cpus } from "node:os";
import { shapeKey, CALIBRATION_FORMAT, CALIBRATION_VERSION, type CollectiveFit, type HostOverhead, type OptimizerTiming } from "../cost/calibration.js";
import { onDevice } from "../cost/precision.js";
import { numel } from "../graph/dim.js";
import type { Graph, TensorId } from "../graph/graph.js";
import type { Precision } from "../check/settings-types.js";
import { syntheticData } from "../data/synthetic.js";
import { initParams } from "../interp/init.js";
import { concreteShape } from "../interp/run.js";
import { isFloatDType } from "../graph/types.js";
import { COMPUTE, DeviceBuilder, type DeviceProgram } from "../lower/device-program.js";
import { createNativeCluster, nativeBuildInfo } from "../native/binding.js";
import { concreteAttrs, hasNativeKernel } from "../native/kernels.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import type { Plan } from "../plan/plan.js";
import { sliceBatch } from "./reference-step.js";
import { measureCollectives, measureHandoff, median } from "./calibrate-comm.js";
import { measureLoop } from "./calibrate-loop.js";
import { hostThreadsFor } from "./world.js";

export interface CalibrationFile {
  readonly format: typeof CALIBRATION_FORMAT;
  readonly version: typeof CALIBRATION_VERSION;
  readonly profile: string;
  readonly machine: string;
  readonly date: string;
  readonly cores: number;
  readonly ops: {
    op: string;
    shape: string;
    forwardSeconds: number;
    backwardSeconds: number;
    backwardOps: number;
    allCores: { forwardSeconds: number; backwardSeconds: number };
  }[];
  readonly optimizer: OptimizerTiming;
  readonly host: HostOverhead;
  readonly contention: { devices: number; slowdown: number }[];
  readonly collectives: CollectiveFit[];
}

export interface CalibrateOptions {
  /** Timed runs per measurement (default 5). */
  readonly repeats?: number;
  /** The most devices a run will have: step costs are measured for 1..devices, collectives for groups of
   *  2..devices (default max(4, cores)). */
  readonly devices?: number;
  readonly onProgress?: (what: string) => void;
}

export class CalibrateError extends Error {}

type Leaves = [number, Float32Array | Int32Array][];

/** One micro-batch of the training graph (forward, backward, optimizer) as one device's compute stream, its ops
 *  emitted `times` times over (each op's instructions at k·ops + i), and the slots to fill before a run. */
function buildProgram(g: Graph, bindings: Record<string, number>, full: ReturnType<ReturnType<typeof syntheticData>["batch"]>, params: ReturnType<typeof initParams>, times = 1): { program: DeviceProgram; leaves: Leaves } {
  const b = new DeviceBuilder();
  const slotOf = new Map<TensorId, number>();
  const shapeOf = (t: TensorId): number[] => concreteShape(g.tensor(t).type.shape, bindings);
  const dtypeOf = (t: TensorId): "f32" | "i32" => (isFloatDType(g.tensor(t).type.dtype) ? "f32" : "i32");
  const values: [TensorId, Float32Array | Int32Array][] = [];
  const batch = sliceBatch(full, 0, bindings.B!);
  for (const t of g.inputs()) values.push([t, batch[g.tensor(t).name]!.data as Float32Array | Int32Array]);
  for (const p of g.params()) values.push([p.tensor, params.get(p.name)!.data as Float32Array]);
  for (const [t] of values) slotOf.set(t, b.pin(b.slot(shapeOf(t), dtypeOf(t))));
  for (const st of g.states()) slotOf.set(st.tensor, b.pin(b.slot(shapeOf(st.tensor), dtypeOf(st.tensor))));
  for (let k = 0; k < times; k++) {
    for (const o of g.ops()) {
      const ins = o.inputs.map((t) => slotOf.get(t)!);
      const outs = o.outputs.map((t) => {
        const s = b.slot(shapeOf(t), dtypeOf(t));
        slotOf.set(t, s);
        return s;
      });
      // Updates write every element of their new values, as the executor's in-place updates do: not zeroed.
      b.emit(COMPUTE, o.op, ins, outs, concreteAttrs(o.attrs), "calibrate", o.phase === "optimizer" ? { inPlace: true } : {});
    }
  }
  // The leaves' own slots (the first ones made), not what later ops wrote over the map.
  const leaves: Leaves = values.map(([, data], i) => [i, data]);
  return { program: b.finish(), leaves };
}

/** One micro-batch size's program on one device with one thread and with every core, timed a run at a time
 *  (the sizes interleaved, so a shared machine's slow moments fall on every size alike instead of making one
 *  size look slow and another fast, which the plan search would then pick for its luck). */
class ProgramTimer {
  private readonly clusters: ReturnType<typeof createNativeCluster>[];
  private readonly leaves: Leaves;
  private readonly durations: number[][][];
  private readonly gaps: number[] = [];
  private readonly count: number;

  constructor(program: DeviceProgram, leaves: Leaves, count: number, cores: number) {
    const configs = cores > 1 ? [1, cores] : [1];
    this.clusters = configs.map((threads) => createNativeCluster({ devices: [program], blasThreads: threads, timeoutSeconds: 600 }));
    this.leaves = leaves;
    this.count = count;
    this.durations = configs.map(() => Array.from({ length: count }, () => [] as number[]));
  }

  /** Untimed runs of each configuration (first touches, thread start; a fresh executor's first dozen or so
   *  steps run 2-3× slower): 15 runs, or as many as fit in 0.3 s, at least one. */
  async warm(): Promise<void> {
    for (const c of this.clusters) {
      const t0 = performance.now();
      for (let r = 0; r < 15 && (r === 0 || performance.now() - t0 < 300); r++) {
        for (const [slot, data] of this.leaves) c.set(0, slot, data);
        await c.run(false);
      }
    }
  }

  /** One timed run of each configuration. */
  async once(): Promise<void> {
    for (let k = 0; k < this.clusters.length; k++) {
      const c = this.clusters[k]!;
      // Each run starts from the initial values again (an update would otherwise move the weights).
      for (const [slot, data] of this.leaves) c.set(0, slot, data);
      await c.run(true);
      const t = c.timings(0);
      let busy = 0;
      for (let i = 0; i < this.count; i++) {
        const d = t[2 * i + 1]! - t[2 * i]!;
        this.durations[k]![i]!.push(d);
        busy += d;
      }
      if (k === 0 && this.count > 1) this.gaps.push(Math.max(0, t[2 * this.count - 1]! - t[0]! - busy) / (this.count - 1));
    }
  }

  /** Per instruction: the median with one thread and with every core; the median dispatch between them. */
  result(): { one: number[]; all: number[]; gap: number } {
    const one = this.durations[0]!.map(median);
    return { one, all: this.durations.length > 1 ? this.durations[1]!.map(median) : one, gap: median(this.gaps) };
  }
}

/** How much slower each of N devices computes when all N run at once, one thread each, than one alone: the
 *  micro-batch program of `bindings` repeated to about 20 ms, on each count of devices at once, interleaved
 *  rounds; the span from the first device's first start to the last device's last end (devices that a busy
 *  machine starts one after another share the cores as surely as ones that overlap), its median over rounds
 *  over one device's. */
async function measureContention(g: Graph, bindings: Record<string, number>, full: ReturnType<ReturnType<typeof syntheticData>["batch"]>, params: ReturnType<typeof initParams>, onceSeconds: number, counts: readonly number[], rounds: number): Promise<{ devices: number; slowdown: number }[]> {
  const times = Math.max(1, Math.min(200, Math.ceil(20e-3 / Math.max(onceSeconds, 1e-7))));
  const { program, leaves } = buildProgram(g, bindings, full, params, times);
  // On the host threads a run of n devices gets (their turns are part of what sharing the cores costs).
  const clusters = counts.map((n) => createNativeCluster({ devices: Array.from({ length: n }, () => program), blasThreads: 1, timeoutSeconds: 600, hostThreads: hostThreadsFor(n) }));
  const fill = (c: (typeof clusters)[number], n: number): void => {
    for (let d = 0; d < n; d++) for (const [slot, data] of leaves) c.set(d, slot, data);
  };
  for (let i = 0; i < clusters.length; i++) {
    fill(clusters[i]!, counts[i]!);
    await clusters[i]!.run(false);
  }
  const spans = counts.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < clusters.length; i++) {
      fill(clusters[i]!, counts[i]!);
      await clusters[i]!.run(true);
      let first = Infinity;
      let last = -Infinity;
      for (let d = 0; d < counts[i]!; d++) {
        const t = clusters[i]!.timings(d);
        first = Math.min(first, t[0]!);
        last = Math.max(last, t[t.length - 1]!);
      }
      spans[i]!.push(last - first);
    }
  }
  const alone = median(spans[0]!);
  return counts.map((devices, i) => ({ devices, slowdown: devices === 1 ? 1 : Math.max(1, median(spans[i]!) / alone) }));
}

/** Timing the ops: rounds beyond `repeats` while they take less than this long, up to MAX_OP_ROUNDS. */
const OP_ROUNDS_SECONDS = 0.25;
const MAX_OP_ROUNDS = 200;

export async function calibratePlan(plan: Plan, options: CalibrateOptions = {}): Promise<CalibrationFile> {
  const repeats = options.repeats ?? 5;
  if (plan.cluster.profile !== "cpu") {
    throw new CalibrateError(`calibrate measures this machine's CPU: compile the plan with --cluster cpu (it is for ${plan.cluster.profile})`);
  }
  if (plan.settings.precision !== "fp32") throw new CalibrateError(`calibrate runs fp32 kernels; the plan's precision is ${plan.settings.precision}`);
  if (!(Number.isInteger(repeats) && repeats >= 1)) throw new CalibrateError(`repeats must be a positive integer, got ${repeats}`);
  const cores = availableParallelism();
  const maxDevices = options.devices ?? Math.max(4, cores);
  if (!(Number.isInteger(maxDevices) && maxDevices >= 1 && maxDevices <= 64)) throw new CalibrateError(`devices must be an integer from 1 to 64, got ${maxDevices}`);
  // Its ops are timed one device at a time; a tensor-parallel rank's collectives need its whole group.
  if (plan.settings.tensorParallel > 1) throw new CalibrateError(`not implemented: calibrating a tensor-parallel plan (tensor_parallel = ${plan.settings.tensorParallel}); calibrate the model's plan with tensor_parallel = 1, whose kernels the tensor-parallel ranks run on slices`);
  const g = graphFromJson(plan.model.name, plan.graph);
  const missing = [...new Set(g.ops().map((o) => o.op))].filter((op) => !hasNativeKernel(op));
  if (missing.length > 0) throw new CalibrateError(`no native kernel yet for ${missing.join(", ")}`);
  const seq = plan.settings.seq;
  const seed = plan.run?.seed ?? 0;
  const data = syntheticData(g, { batch: plan.settings.batch, ...(seq !== null && { seq }), seed });
  const full = data.batch(0);
  const params = initParams(g, seed, "f32");
  const byKey = new Map<string, { op: string; shape: string; f: number[]; b: number[]; fAll: number[]; bAll: number[]; n: number }>();
  const dispatch: number[] = [];
  const onceSeconds = new Map<number, number>();
  let optimizer: OptimizerTiming | undefined;
  const sizes = divisors(plan.settings.batch);
  const bindingsOf = (mbs: number): Record<string, number> => (seq === null ? { B: mbs } : { B: mbs, S: seq });
  const timers = sizes.map((mbs) => {
    const { program, leaves } = buildProgram(g, bindingsOf(mbs), full, params);
    return new ProgramTimer(program, leaves, g.ops().length, cores);
  });
  options.onProgress?.(`ops at micro-batch sizes ${sizes.join(", ")}`);
  for (const t of timers) await t.warm();
  // At least `repeats` rounds, and as many more as fit in a quarter of a second (at most 200): a small model's
  // micro-batch takes tens of microseconds, and five of them are a median of under a millisecond of samples
  // on a machine whose load moves on a longer scale.
  const opsStarted = performance.now();
  for (let r = 0; r < repeats || (r < MAX_OP_ROUNDS && performance.now() - opsStarted < 1000 * OP_ROUNDS_SECONDS); r++) {
    for (const t of timers) await t.once();
  }
  for (const [k, mbs] of sizes.entries()) {
    const bindings = bindingsOf(mbs);
    const { one, all, gap } = timers[k]!.result();
    onceSeconds.set(mbs, one.reduce((a, x) => a + x, 0));
    dispatch.push(gap);
    const ops = g.ops();
    const index = new Map(ops.map((o, i) => [o.id, i]));
    const backward = new Map<number, { one: number; all: number; n: number }>();
    let opt = { one: 0, all: 0, n: 0 };
    for (const o of ops) {
      const i = index.get(o.id)!;
      if (o.phase === "optimizer") opt = { one: opt.one + one[i]!, all: opt.all + all[i]!, n: opt.n + 1 };
      if ((o.phase === "backward" || o.phase === "weight_grad") && o.forwardOp !== undefined) {
        const x = backward.get(o.forwardOp) ?? { one: 0, all: 0, n: 0 };
        backward.set(o.forwardOp, { one: x.one + one[i]!, all: x.all + all[i]!, n: x.n + 1 });
      }
    }
    // The optimizer's work does not depend on the micro-batch: timed once, at the full batch.
    if (mbs === plan.settings.batch) optimizer = { stateBytes: stateBytes(g), seconds: opt.one, allCoresSeconds: opt.all, ops: opt.n };
    for (const o of ops) {
      if (o.phase !== "forward") continue;
      const i = index.get(o.id)!;
      const shape = shapeKey(o.inputs.map((t) => onDevice(g.tensor(t).type, plan.settings.precision as Precision)), o.attrs, bindings);
      const key = `${o.op}\0${shape}`;
      const bw = backward.get(o.id) ?? { one: 0, all: 0, n: 0 };
      if (!byKey.has(key)) byKey.set(key, { op: o.op, shape, f: [], b: [], fAll: [], bAll: [], n: bw.n });
      const e = byKey.get(key)!;
      e.f.push(one[i]!);
      e.fAll.push(all[i]!);
      e.b.push(bw.one);
      e.bAll.push(bw.all);
    }
  }
  // Devices computing at once share the cores: measured at what one device of a data-parallel plan over the
  // most devices computes (the largest micro-batch dividing batch / devices).
  options.onProgress?.("devices sharing the cores");
  const share = Math.max(...divisors(plan.settings.batch).filter((d) => d * maxDevices <= plan.settings.batch), 1);
  const shareBindings: Record<string, number> = seq === null ? { B: share } : { B: share, S: seq };
  const counts = deviceCounts(maxDevices);
  // At least 9 rounds: over 5, two calibrations of mlp measured 2 devices at 1.02× and 1.83× one alone.
  const contention = await measureContention(g, shareBindings, full, params, onceSeconds.get(share)!, counts, Math.max(9, repeats));
  // The host's whole step around the programs: the run loop's feeding, the executor's start and finish, the
  // next batch made meanwhile, the losses read.
  options.onProgress?.("the run loop's step on devices that compute nothing");
  const loop = await measureLoop(g, (step) => data.batch(step), plan.settings.batch, seq, counts, Math.max(3, repeats));
  options.onProgress?.("collectives");
  const collectives = await measureCollectives(counts.filter((n) => n >= 2), Math.max(3, repeats), options.onProgress);
  const pair = collectives.find((c) => c.kind === "all_reduce" && c.ranks === 2);
  options.onProgress?.("the hand-off between compute and communication");
  const handoff = pair ? await measureHandoff(Math.max(5, repeats), (bytes) => pair.latencySeconds + pair.secondsPerByte * bytes) : 0;
  const cpu = cpus();
  return {
    format: CALIBRATION_FORMAT,
    version: CALIBRATION_VERSION,
    profile: "cpu",
    machine: `${cpu[0]?.model.trim() ?? "unknown CPU"}, ${cpu.length} CPUs, ${nativeBuildInfo().blas} BLAS`,
    date: new Date().toISOString(),
    cores,
    ops: [...byKey.values()].map((e) => ({
      op: e.op,
      shape: e.shape,
      // A measured op takes some time (the file format refuses 0): at least the timer's nanosecond.
      forwardSeconds: Math.max(1e-9, median(e.f)),
      backwardSeconds: median(e.b),
      backwardOps: e.n,
      allCores: { forwardSeconds: Math.max(1e-9, median(e.fAll)), backwardSeconds: median(e.bAll) },
    })),
    optimizer: optimizer!,
    host: { instructionSeconds: median(dispatch), loopSeconds: loop.loopSeconds, batchSeconds: loop.batchSeconds, handoffSeconds: handoff, step: loop.step, blockingStep: loop.blockingStep },
    contention,
    collectives,
  };
}

/** The device counts measured: every one up to 4, then the powers of two up to `max` (and `max`). */
export function deviceCounts(max: number): number[] {
  const counts = new Set<number>();
  for (let n = 1; n <= Math.min(4, max); n++) counts.add(n);
  for (let n = 8; n <= max; n *= 2) counts.add(n);
  counts.add(max);
  return [...counts].sort((a, b) => a - b);
}

const divisors = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1).filter((d) => n % d === 0);

/** The model state an optimizer step reads and writes: every parameter, its gradient and its optimizer state
 *  (fp32; what the shard plan's state bytes count). */
function stateBytes(g: Graph): number {
  let n = 0;
  for (const p of g.params()) n += 2 * 4 * numel(p.type.shape);
  for (const s of g.states()) n += 4 * numel(s.type.shape);
  return n;
}
