// Overlap of one stage's shard collectives with its compute: when each collective is issued on the stage's
// comm stream, how far ahead FSDP all-gathers are prefetched, and how much communication stays exposed.
//
// Model: one compute stream runs the stage's passes op by op (an op = one phase of one layer for one
// micro-batch); one comm stream runs collectives one at a time in issue order (as NCCL runs one stream).
// Collectives with an `after` point are issued when that op ends (a gradient bucket as soon as its last
// gradient is ready). An ALL_GATHER (a `before` point) must end before its op starts; it is issued at the
// start of the latest earlier op from which waiting one more op would make it finish late, judged with
// collective times from the cost model and compute times of the ops in between, unless the gathered bytes
// would exceed the prefetch budget or the unit is still gathered for an earlier micro-batch (then as soon as
// that clears, and at the latest on demand). Gathers issue in the order they are needed. The optimizer
// step waits for every gradient collective; broadcasts after it end the step. A tied weight's gradient
// all-reduce (plan.tiedCollectives) runs on the same stream, before or after the stage's reduction of that
// weight as its `reduction.order` says; its partner stages are taken to be ready (the rendezvous wait for a
// stage further back in the pipeline is the pipeline model's to add, not this one's).
//
//   exposedComm = stepEnd − (the same step with free communication)
import type { Cluster } from "../cost/cluster.js";
import { groupCollectiveTime, type CollectiveKind } from "../cost/collectives.js";
import type { Phase } from "../graph/graph.js";
import type { LayerSeconds } from "./layer-times.js";
import type { ComputePass } from "./passes.js";
import { formatPoint } from "./points.js";
import type { ShardCollective, ShardCollectiveKind, ShardPlan, StepPoint, TiedCollective } from "./types.js";

export interface OverlapOptions {
  readonly cluster: Cluster;
  /** One entry per stage layer (index 0 is plan.layers.start), seconds for one micro-batch. */
  readonly layerSeconds: readonly LayerSeconds[];
  /** The stage's compute order (e.g. a rank's F/B/I/W actions of this stage). B runs I then W per layer. */
  readonly passes: readonly ComputePass[];
  /** The optimizer step, after the last pass and every gradient collective (default 0). */
  readonly optimizerSeconds?: number;
  /** Most gathered FSDP bytes resident at once (default unbounded). Only prefetching is held back: the unit
   *  the next op needs is gathered regardless. */
  readonly prefetchBudgetBytes?: number;
  /** Per weight with a tied all-reduce in the plan: the global ranks of one of its groups (e.g.
   *  tiedGroups(plans, name)[0]), which the cost model needs to time it. */
  readonly tiedGroups?: Readonly<Record<string, readonly number[]>>;
}

/** A compute op as the lowering names it. */
export interface OpRef {
  readonly phase: Phase | "recompute";
  readonly layer: number;
  readonly mb: number;
}

export interface TimedCollective {
  /** Index into plan.collectives, or into plan.tiedCollectives when `tied` is set. */
  readonly index: number;
  /** The weight of a tied all-reduce. */
  readonly tied?: string;
  readonly kind: ShardCollectiveKind;
  readonly unit: number;
  /** Micro-batch of the op it hangs on; undefined for those after the optimizer step. */
  readonly mb: number | undefined;
  readonly issue: number;
  readonly start: number;
  readonly end: number;
  /** ALL_GATHER: issued at the start of this op (the lowering makes it depend on the op before). */
  readonly issuedBefore?: OpRef;
  /** ALL_GATHER: compute ops between the issue point and the op that needs it (0 = gathered on demand). */
  readonly aheadOps?: number;
}

export interface OverlapReport {
  /** In comm-stream order (which is issue order). */
  readonly collectives: readonly TimedCollective[];
  readonly computeEnd: number;
  readonly stepEnd: number;
  /** stepEnd with free communication: compute, input arrival and the optimizer alone. */
  readonly noCommStepEnd: number;
  readonly exposedComm: number;
  /** Seconds the comm stream is busy. */
  readonly commSeconds: number;
  readonly peakGatheredBytes: number;
}

const COST_KIND: Readonly<Record<ShardCollectiveKind, CollectiveKind>> = {
  ALL_GATHER: "all_gather",
  REDUCE_SCATTER: "reduce_scatter",
  ALL_REDUCE: "all_reduce",
  BROADCAST: "broadcast",
  REDUCE: "reduce",
};

interface Op extends OpRef {
  readonly seconds: number;
  readonly readyAt: number;
}

interface Instance {
  readonly index: number;
  readonly c: ShardCollective | TiedCollective;
  readonly seconds: number;
  readonly mb: number | undefined;
}

/** The stage's ops in run order. */
function expand(plan: ShardPlan, o: OverlapOptions): Op[] {
  const { start, end } = plan.layers;
  if (o.layerSeconds.length !== end - start) {
    throw new Error(`internal: layerSeconds has ${o.layerSeconds.length} entries for the ${end - start} layers of stage ${plan.stage}`);
  }
  for (const [i, l] of o.layerSeconds.entries()) {
    for (const v of [l.forward, l.backward, l.weightGrad]) {
      if (!(Number.isFinite(v) && v >= 0)) throw new Error(`internal: layerSeconds[${i}] has a time that is not a finite non-negative number: ${v}`);
    }
  }
  if (plan.strategy === "fsdp" && plan.collectives.length > 0 && o.passes.some((p) => p.kind === "R")) {
    throw new Error("not implemented: FSDP with stage-level recompute passes (R); count the recompute in the backward's time instead");
  }
  const up = Array.from({ length: end - start }, (_, i) => start + i);
  const down = [...up].reverse();
  const ops: Op[] = [];
  for (const p of o.passes) {
    const first = ops.length;
    const t = (layer: number) => o.layerSeconds[layer - start]!;
    const add = (phase: OpRef["phase"], layer: number, seconds: number) => ops.push({ phase, layer, mb: p.mb, seconds, readyAt: 0 });
    if (p.kind === "F") for (const l of up) add("forward", l, t(l).forward);
    else if (p.kind === "R") for (const l of up) add("recompute", l, t(l).forward);
    else if (p.kind === "I") for (const l of down) add("backward", l, t(l).backward);
    else if (p.kind === "W") for (const l of down) add("weight_grad", l, t(l).weightGrad);
    else for (const l of down) (add("backward", l, t(l).backward), add("weight_grad", l, t(l).weightGrad));
    const readyAt = p.readyAt ?? 0;
    if (!(Number.isFinite(readyAt) && readyAt >= 0)) throw new Error(`internal: pass ${p.kind}${p.mb} has a bad readyAt ${readyAt}`);
    if (ops.length > first) ops[first] = { ...ops[first]!, readyAt };
  }
  return ops;
}

/** The op indices a point names: every occurrence, or the first or last one. */
function resolve(at: StepPoint, occurrences: ReadonlyMap<string, number[]>, what: string): number[] {
  const list = occurrences.get(`${at.phase}:${at.layer}`) ?? [];
  if (list.length === 0) throw new Error(`internal: the stage's compute order has no op for ${what} (${formatPoint(at)})`);
  return at.microBatch === "each" ? list : at.microBatch === "first" ? [list[0]!] : [list[list.length - 1]!];
}

export function simulateShardOverlap(plan: ShardPlan, o: OverlapOptions): OverlapReport {
  const ops = expand(plan, o);
  const n = ops.length;
  const budget = o.prefetchBudgetBytes ?? Infinity;
  const optimizerSeconds = o.optimizerSeconds ?? 0;
  const occurrences = new Map<string, number[]>();
  ops.forEach((op, i) => {
    const key = `${op.phase}:${op.layer}`;
    const list = occurrences.get(key);
    if (list) list.push(i);
    else occurrences.set(key, [i]);
  });

  // Attach every collective occurrence to the op it waits for (after) or gates (before).
  const afterOp: Instance[][] = Array.from({ length: n }, () => []);
  const afterOptimizer: Instance[] = [];
  const gathers: (Instance & { target: number })[] = [];
  plan.collectives.forEach((c, index) => {
    const seconds = groupCollectiveTime(o.cluster, COST_KIND[c.kind], c.bytes, c.group);
    if (c.at.phase === "optimizer") {
      afterOptimizer.push({ index, c, seconds, mb: undefined });
      return;
    }
    for (const i of resolve(c.at, occurrences, `${c.kind} of unit ${c.unit}`)) {
      const inst = { index, c, seconds, mb: ops[i]!.mb };
      if (c.at.when === "before") gathers.push({ ...inst, target: i });
      else afterOp[i]!.push(inst);
    }
  });
  plan.tiedCollectives.forEach((c, index) => {
    const group = o.tiedGroups?.[c.param];
    if (!group) {
      throw new Error(`internal: timing stage ${plan.stage} needs OverlapOptions.tiedGroups['${c.param}'] (the ranks of its tied all-reduce)`);
    }
    const seconds = groupCollectiveTime(o.cluster, COST_KIND[c.kind], c.bytes, group);
    // tiedFirst: the stage's reduction of the weight hanging on the same op must wait for it.
    const first = c.reduction?.order === "tiedFirst";
    for (const i of resolve(c.at, occurrences, `tied ALL_REDUCE of '${c.param}'`)) {
      const inst = { index, c, seconds, mb: ops[i]!.mb };
      if (first) afterOp[i]!.unshift(inst);
      else afterOp[i]!.push(inst);
    }
  });
  gathers.sort((a, b) => a.target - b.target || a.index - b.index);
  const freed: { unit: number; bytes: number }[][] = Array.from({ length: n }, () => []);
  for (const f of plan.frees) for (const i of resolve(f.at, occurrences, `FREE of unit ${f.unit}`)) freed[i]!.push({ unit: f.unit, bytes: f.bytes });

  // Prefix sums of compute and the start times without communication (readyAt still applies).
  const prefix = new Float64Array(n + 1);
  const noComm = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    prefix[i + 1] = prefix[i]! + ops[i]!.seconds;
    noComm[i] = Math.max(i === 0 ? 0 : noComm[i - 1]! + ops[i - 1]!.seconds, ops[i]!.readyAt);
  }
  const noCommComputeEnd = n === 0 ? 0 : noComm[n - 1]! + ops[n - 1]!.seconds;

  const timed: TimedCollective[] = [];
  let commFree = 0;
  let resident = 0;
  let peak = 0;
  // Gathered copies per unit: a unit still gathered (for an earlier micro-batch) is not gathered again ahead
  // of time; its weights do not change within a step, so that copy would only double its memory.
  const copies = new Map<number, number>();
  const gatheredBy = new Float64Array(n);
  const run = (inst: Instance, issue: number, extra: Partial<TimedCollective> = {}): number => {
    const start = Math.max(commFree, issue);
    commFree = start + inst.seconds;
    const tied = inst.c.of === "tiedGrad" ? { tied: inst.c.param } : {};
    timed.push({ index: inst.index, ...tied, kind: inst.c.kind, unit: inst.c.unit, mb: inst.mb, issue, start, end: commFree, ...extra });
    return commFree;
  };
  let next = 0;
  let free = 0; // the compute stream is free from here
  for (let i = 0; i < n; i++) {
    const op = ops[i]!;
    while (next < gathers.length) {
      const g = gathers[next]!;
      if (g.target !== i) {
        if (resident + g.c.bytes > budget || (copies.get(g.c.unit) ?? 0) > 0) break;
        // Would it still be on time if issued at the next op boundary instead? The comm stream then also
        // carries what op i releases. All gathers op i needs are issued already (need order).
        const startI = Math.max(free, op.readyAt, gatheredBy[i]!);
        const endI = startI + op.seconds;
        let q = commFree;
        for (const a of afterOp[i]!) q = Math.max(q, endI) + a.seconds;
        const finishLater = Math.max(q, endI) + g.seconds;
        // Start of the target with no further stalls: the later of its no-comm start and op i's start plus
        // the compute in between (every delay before op i is carried by startI).
        const targetStart = Math.max(noComm[g.target]!, startI + prefix[g.target]! - prefix[i]!);
        if (finishLater <= targetStart) break;
      }
      const end = run(g, free, { issuedBefore: { phase: op.phase, layer: op.layer, mb: op.mb }, aheadOps: g.target - i });
      gatheredBy[g.target] = Math.max(gatheredBy[g.target]!, end);
      resident += g.c.bytes;
      copies.set(g.c.unit, (copies.get(g.c.unit) ?? 0) + 1);
      peak = Math.max(peak, resident);
      next++;
    }
    const start = Math.max(free, op.readyAt, gatheredBy[i]!);
    free = start + op.seconds;
    for (const a of afterOp[i]!) run(a, free);
    for (const f of freed[i]!) {
      resident -= f.bytes;
      copies.set(f.unit, copies.get(f.unit)! - 1);
    }
  }
  const computeEnd = free;
  const optimizerEnd = Math.max(computeEnd, commFree) + optimizerSeconds;
  for (const a of afterOptimizer) run(a, optimizerEnd);
  const stepEnd = Math.max(optimizerEnd, commFree);
  const noCommStepEnd = noCommComputeEnd + optimizerSeconds;
  return {
    collectives: timed,
    computeEnd,
    stepEnd,
    noCommStepEnd,
    // Never negative but for rounding: every op starts no earlier than it would with free communication.
    exposedComm: Math.max(0, stepEnd - noCommStepEnd),
    commSeconds: timed.reduce((s, t) => s + (t.end - t.start), 0),
    peakGatheredBytes: peak,
  };
}
