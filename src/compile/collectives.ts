// Step 6b of compile: each stage's shard collectives (src/shard) placed into its program. Gradient and
// broadcast collectives are issued where their step point says (after a layer of a backward action, after
// the optimizer); FSDP all-gathers are deadlines before the layer that needs the unit, issued one need ahead
// (when compute reaches the previous point that needs a gather, as FSDP's forward/backward prefetch does), so
// at most the unit in use and the next one are in flight beyond those kept gathered.
import type { Cluster } from "../cost/cluster.js";
import { groupCollectiveTime, type CollectiveKind } from "../cost/collectives.js";
import { collectiveAction } from "../shard/actions.js";
import type { FsdpUnit, ShardCollective, ShardCollectiveKind, ShardPlan, StepPoint } from "../shard/types.js";
import type { Lifetime } from "./lifetimes.js";
import { segmentOf, type Program, type Rendezvous } from "./program.js";
import { runPrograms } from "./engine.js";
import { compareOrder, type Placer, type StageOccurrences } from "./placer.js";

export const COST_KIND: Readonly<Record<ShardCollectiveKind, CollectiveKind>> = {
  ALL_GATHER: "all_gather",
  REDUCE_SCATTER: "reduce_scatter",
  ALL_REDUCE: "all_reduce",
  BROADCAST: "broadcast",
  REDUCE: "reduce",
};

/** The compute actions a step point names. Forward `before` points also gate recomputes (R re-runs the
 *  forward and needs the weights); forward `after` points of every micro-batch follow R as well. */
export function occurrencesOf(at: StepPoint, occ: StageOccurrences): number[] {
  let list: number[];
  switch (at.phase) {
    case "forward":
      list = at.microBatch === "each" ? occ.forwardLike : occ.F;
      break;
    case "backward":
      list = occ.backwardLike;
      break;
    case "weight_grad":
      list = occ.weightLike;
      break;
    case "optimizer":
      return [occ.optimizer];
  }
  if (list.length === 0) throw new Error(`internal: no compute action for ${at.phase} points`);
  return at.microBatch === "each" ? list : at.microBatch === "first" ? [list[0]!] : [list[list.length - 1]!];
}

interface Need {
  readonly stage: number;
  readonly plan: ShardPlan;
  readonly c: ShardCollective;
  readonly action: number;
  readonly layer: number;
  readonly mb: number | undefined;
}

export interface PlacedCollectives {
  readonly lifetimes: Lifetime[];
  /** Per stage: its gradient collectives (the optimizer step waits for the last of them). */
  readonly gradients: Map<number, { program: number; id: number }[]>;
  /** `${stage}:${collective index}:${compute action}` → the placed instance. */
  readonly placed: Map<string, number>;
  /** Collectives after the optimizer step (OSS/ShardedDDP broadcasts), placed by placeAfterOptimizer once
   *  the step's own waits are known. */
  readonly afterOptimizer: { program: number; plan: ShardPlan; c: ShardCollective }[];
  /** sddp: per backward action, the REDUCEs of its micro-batch; its gradients stay staged until the last. */
  readonly staged: { program: number; stage: number; action: number; reduces: number[]; bytes: number }[];
  /** fsdp: gates that let a unit's gradient buffer be reused micro-batch to micro-batch (applyGradientReuse). */
  readonly reuse: GradientReuse[];
  /** Collectives that must stay behind another of their program on the comm stream (a hybrid shard group's
   *  all-reduce behind the reduce-scatter it sums), whatever later placement moves (keepBehind). */
  readonly followers: { program: number; id: number; after: number }[];
}

/** Moves each follower behind the collective it sums, once the tied all-reduces may have moved that one
 *  later (a tiedFirst reduction is rekeyed behind its tied all-reduce). */
export function keepBehind(placer: Placer, followers: PlacedCollectives["followers"]): void {
  for (const f of followers) placer.rekey(f.program, f.id, placer.orderOf(f.program, f.after)[0]);
}

/** Before `layer` of backward `action` (where it first writes a unit's gradient), the previous micro-batch's
 *  reduce-scatter of that unit (`after`) has finished. */
export interface GradientReuse {
  readonly program: number;
  readonly action: number;
  readonly layer: number;
  readonly after: number;
}

/**
 * Adds the gradient-reuse gates when the finished programs still run to the end with them, as the runtime
 * then reuses one buffer per unit (its lowering follows the gates); otherwise none, and each micro-batch's
 * gradient has its own buffer while the previous one is reduce-scattered. A gate can deadlock when the
 * comm stream queues the reduce-scatter behind a transfer that waits for the gated backward (a pipeline's
 * SEND_B of the next micro-batch), which the placement order decides.
 */
export function applyGradientReuse(programs: readonly Program[], rendezvous: readonly Rendezvous[], reuse: readonly GradientReuse[]): void {
  if (reuse.length === 0) return;
  for (const r of reuse) programs[r.program]!.actions[r.action]!.gates.push([r.layer, r.after]);
  if (runPrograms(programs, rendezvous).complete) return;
  for (const r of reuse) {
    const gates = programs[r.program]!.actions[r.action]!.gates;
    gates.splice(gates.findIndex(([l, a]) => l === r.layer && a === r.after), 1);
  }
}

export const placedKey = (stage: number, collective: number, action: number): string => `${stage}:${collective}:${action}`;

export function placeShardCollectives(placer: Placer, shards: readonly ShardPlan[], cluster: Cluster, programOf: (stage: number) => number, prefetch = 1): PlacedCollectives {
  const lifetimes: Lifetime[] = [];
  const gradients = new Map<number, { program: number; id: number }[]>();
  const placed = new Map<string, number>();
  const stagedAll: PlacedCollectives["staged"] = [];
  const reuse: GradientReuse[] = [];
  const afterOptimizer: PlacedCollectives["afterOptimizer"] = [];
  const followers: PlacedCollectives["followers"] = [];
  const needs = placer.programs.map((): Need[] => []);
  for (const plan of shards) {
    const p = programOf(plan.stage);
    const occ = placer.stage(plan.stage);
    const grads: { program: number; id: number }[] = [];
    gradients.set(plan.stage, grads);
    // sddp: the stage's gradient buckets of one micro-batch are staged until their last REDUCE.
    const staged = new Map<number, number[]>();
    // Per FSDP reduce-scatter (a unit's): the last one placed, for the next micro-batch's gradient to wait on.
    const lastReduceScatter = new Map<number, number>();
    // Per unit: its reduce-scatter placed last, which a hybrid shard group's all-reduce of the unit follows.
    const reducedBy = new Map<number, number>();
    for (const [ci, c] of plan.collectives.entries()) {
      const seconds = groupCollectiveTime(cluster, COST_KIND[c.kind], c.bytes, c.group);
      const collective = { group: "data" as const, of: c.of, bytes: c.bytes };
      const each = c.at.microBatch === "each";
      if (c.at.phase === "optimizer") {
        afterOptimizer.push({ program: p, plan, c });
        continue;
      }
      for (const x of occurrencesOf(c.at, occ)) {
        const mb = each ? placer.action(p, x).action.mb : undefined;
        if (c.at.when === "before") {
          needs[p]!.push({ stage: plan.stage, plan, c, action: x, layer: c.at.layer, mb });
          continue;
        }
        const action = collectiveAction(plan, c, mb);
        const follows = c.kind === "ALL_REDUCE" && c.of === "unit" ? reducedBy.get(c.unit) ?? -1 : undefined;
        if (follows === -1) throw new Error(`internal: stage ${plan.stage} all-reduces unit ${c.unit} before reduce-scattering it`);
        const id = placer.add(p, { action, stream: "comm", seconds: [seconds], partial: [[x, c.at.layer]], ...(follows !== undefined && { deps: [follows] }), collective }, placer.endOf(p, x, c.at.layer), 2);
        if (follows !== undefined) followers.push({ program: p, id, after: follows });
        placed.set(placedKey(plan.stage, ci, x), id);
        grads.push({ program: p, id });
        if (c.kind === "REDUCE_SCATTER") {
          // The unit's unsharded gradient appears when the backward reaches the first layer (in its run order)
          // that reads the unit's parameters, not when the action starts: FSDP's one-unit-at-a-time promise.
          const unit = plan.units.find((u) => u.index === c.unit);
          // no_sync (a reduce-scatter of the last micro-batch only): every micro-batch accumulates into the
          // unit's one gradient buffer, which is born where the step's first backward first writes it.
          const writer = each ? x : occurrencesOf({ ...c.at, microBatch: "first" }, occ)[0]!;
          const fromLayer = firstLayerReading(placer.action(p, writer).layers, unit);
          // One buffer per unit at a time: a micro-batch's first write of the unit's gradient waits for the
          // previous micro-batch's reduce-scatter of it (FSDP's rate limit on memory), where the schedule
          // allows (applyGradientReuse).
          const previous = lastReduceScatter.get(ci);
          if (previous !== undefined && fromLayer !== undefined) reuse.push({ program: p, action: x, layer: fromLayer, after: previous });
          lastReduceScatter.set(ci, id);
          reducedBy.set(c.unit, id);
          lifetimes.push({ program: p, name: `s${plan.stage} unit ${c.unit} gradient ${each ? `mb ${mb}` : "of the step"}`, kind: "grad", bytes: c.bytes, from: writer, ...(fromLayer !== undefined && { fromLayer }), to: id, stage: plan.stage, ...(mb !== undefined && { mb }) });
          // Every micro-batch after the first reduces into a fresh shard that is then added to the step's
          // sharded gradient (FSDP2's reduce-scatter output, accumulated after): live while the collective runs.
          if (previous !== undefined && unit) {
            const bytes = Math.ceil((c.bytes * unit.shardNumel) / unit.paddedNumel);
            lifetimes.push({ program: p, name: `s${plan.stage} unit ${c.unit} reduce-scatter output mb ${mb}`, kind: "comm", bytes, from: id, to: id, stage: plan.stage, ...(mb !== undefined && { mb }) });
          }
        } else if (c.kind === "REDUCE") {
          const list = staged.get(x) ?? [];
          list.push(id);
          staged.set(x, list);
        }
      }
    }
    const bytes = plan.gradBuckets.reduce((n, b) => n + b.bytes, 0);
    for (const [x, reduces] of staged) stagedAll.push({ program: p, stage: plan.stage, action: x, reduces, bytes });
  }
  needs.forEach((list, p) => {
    for (const l of placeGathers(placer, p, list, cluster, prefetch)) lifetimes.push(l);
  });
  return { lifetimes, gradients, placed, staged: stagedAll, afterOptimizer, reuse, followers };
}

/**
 * The broadcasts after each stage's optimizer step. Their key is the step's: its reference end, but no
 * earlier than any comm action it waits for (the reference run did not have those waits), so that nothing
 * the step waits for queues behind them.
 */
export function placeAfterOptimizer(placer: Placer, list: PlacedCollectives["afterOptimizer"], cluster: Cluster): void {
  for (const { program: p, plan, c } of list) {
    const x = placer.stage(plan.stage).optimizer;
    let key = placer.endOf(p, x);
    for (const d of placer.action(p, x).deps) if (placer.action(p, d).stream === "comm") key = Math.max(key, placer.orderOf(p, d)[0]);
    const seconds = groupCollectiveTime(cluster, COST_KIND[c.kind], c.bytes, c.group);
    placer.add(p, { action: collectiveAction(plan, c), stream: "comm", seconds: [seconds], deps: [x], collective: { group: "data", of: c.of, bytes: c.bytes } }, key, 2);
  }
}

/** sddp staging buffers, once the comm order is final (a tied all-reduce may move a REDUCE later). */
/** The first of an action's layers (in the order it runs them) inside the span of layers reading the unit. */
function firstLayerReading(runOrder: readonly number[], unit: FsdpUnit | undefined): number | undefined {
  if (!unit) return undefined;
  return runOrder.find((l) => l >= unit.span.first && l <= unit.span.last);
}

/** `firstLayer(stage)`: the layer whose backward first writes one of the stage's gradients, where a staged
 *  buffer begins (the runtime lays a bucket out from the first instruction that writes it). */
export function stagedLifetimes(placer: Placer, staged: PlacedCollectives["staged"], firstLayer: (stage: number) => number | undefined = () => undefined): Lifetime[] {
  return staged.map((s) => {
    const last = s.reduces.reduce((a, b) => (compareOrder(placer.orderOf(s.program, a), placer.orderOf(s.program, b)) >= 0 ? a : b));
    const mb = placer.action(s.program, s.action).action.mb;
    const fromLayer = firstLayer(s.stage);
    return { program: s.program, name: `s${s.stage} gradients mb ${mb}`, kind: "grad", bytes: s.bytes, from: s.action, ...(fromLayer !== undefined && { fromLayer }), to: last, stage: s.stage, ...(mb !== undefined && { mb }) };
  });
}

/**
 * All-gathers of one program in the order compute needs them. The needs at the k-th distinct point (action,
 * layer) are issued when compute begins the (k−d)-th point, d the prefetch depth, so each overlaps the
 * compute between the two points (and its unit is held from then); the first d points' gathers are issued at
 * the start of the step.
 */
function placeGathers(placer: Placer, p: number, needs: Need[], cluster: Cluster, depth: number): Lifetime[] {
  const where = (n: Need) => [placer.computePosition(p, n.action), segmentOf(placer.action(p, n.action), n.layer)] as const;
  needs.sort((a, b) => {
    const [x1, y1] = where(a);
    const [x2, y2] = where(b);
    return x1 - x2 || y1 - y2;
  });
  const lifetimes: Lifetime[] = [];
  const points: Need[] = []; // the first need of each distinct point so far
  let issue: { deps: number[]; partial: [number, number][]; time: number } = { deps: [], partial: [], time: 0 };
  for (const n of needs) {
    const last = points[points.length - 1];
    if (!last || last.action !== n.action || last.layer !== n.layer) {
      points.push(n);
      const from = points[points.length - 1 - depth];
      // Not prefetched across a wait: a need in an action that waits for communication of its own (a
      // backward for its output gradient) is gathered when that action can begin, as FSDP gathers the first
      // unit of a backward when the backward reaches it, rather than held through the pipeline's wait.
      const waits = placer.action(p, n.action).deps.some((d) => placer.action(p, d).stream === "comm");
      const across = from !== undefined && from.action !== n.action && waits;
      issue = across ? beginning(placer, p, n) : from ? beginning(placer, p, from) : { deps: [], partial: [], time: 0 };
    }
    const seconds = groupCollectiveTime(cluster, COST_KIND[n.c.kind], n.c.bytes, n.c.group);
    const id = placer.add(
      p,
      { action: collectiveAction(n.plan, n.c, n.mb), stream: "comm", seconds: [seconds], deps: [...issue.deps], partial: issue.partial.map((x) => [x[0], x[1]]), collective: { group: "data", of: n.c.of, bytes: n.c.bytes } },
      issue.time,
      1,
    );
    placer.action(p, n.action).gates.push([n.layer, id]);
    const free = freePoint(placer, p, n);
    lifetimes.push({
      program: p,
      name: `s${n.stage} unit ${n.c.unit} gathered${n.mb === undefined ? "" : ` mb ${n.mb}`}`,
      kind: "gathered",
      bytes: n.c.bytes,
      from: id,
      to: free.action,
      toLayer: free.layer,
      stage: n.stage,
      ...(n.mb !== undefined && { mb: n.mb }),
    });
  }
  return lifetimes;
}

/** The point where compute begins a need's layer: the end of the layer before it in the same action, or of
 *  the compute action before that one (nothing for the first action of the stream). */
function beginning(placer: Placer, p: number, n: Need): { deps: number[]; partial: [number, number][]; time: number } {
  const a = placer.action(p, n.action);
  const seg = segmentOf(a, n.layer);
  if (seg > 0) {
    const layer = a.layers[seg - 1]!;
    return { deps: [], partial: [[n.action, layer]], time: placer.endOf(p, n.action, layer) };
  }
  // The action's first layer begins once the compute before it is done and the action's own dependencies
  // are met (a backward waits for its output gradient): a gather issued then, not as soon as the previous
  // action ends, does not hold its unit through a pipeline's wait for the next stage.
  const prev = placer.previousCompute(p, n.action);
  const deps = [...(prev === undefined ? [] : [prev]), ...a.deps.filter((d) => d !== prev)];
  const time = Math.max(0, ...deps.map((d) => placer.endOf(p, d)));
  return { deps, partial: [], time };
}

/** The first FREE point of the gathered unit at or after the point that needs it. */
function freePoint(placer: Placer, p: number, n: Need): { action: number; layer: number } {
  const occ = placer.stage(n.stage);
  const [x0, y0] = [placer.computePosition(p, n.action), segmentOf(placer.action(p, n.action), n.layer)];
  let best: { action: number; layer: number; x: number; y: number } | undefined;
  for (const f of n.plan.frees) {
    if (f.unit !== n.c.unit) continue;
    for (const x of occurrencesOf(f.at, occ)) {
      const xp = placer.computePosition(p, x);
      const yp = segmentOf(placer.action(p, x), f.at.layer);
      if (xp < x0 || (xp === x0 && yp < y0)) continue;
      if (!best || xp < best.x || (xp === best.x && yp < best.y)) best = { action: x, layer: f.at.layer, x: xp, y: yp };
    }
  }
  if (!best) throw new Error(`internal: stage ${n.stage} gathers unit ${n.c.unit} but never frees it afterwards`);
  return { action: best.action, layer: best.layer };
}
