// Step 5a of compile: the cost model seen by the schedule. Per-layer compute seconds of one micro-batch from
// costGraph, per-stage sums (ScheduleCosts for src/schedule), activation bytes per stage from the tensors the
// backward keeps, and p2p transfer times over the cluster's links.
import type { Cluster } from "../cost/cluster.js";
import { collectiveTime, groupLink } from "../cost/collectives.js";
import { costGraph } from "../cost/graph-cost.js";
import { calibratedOptimizerSeconds } from "../cost/calibrated-pricing.js";
import { onDevice, opScratch, weightGradientBytes } from "../cost/precision.js";
import type { Graph, TensorId } from "../graph/graph.js";
import type { DimBindings } from "../graph/op-cost.js";
import { bytesOf } from "../graph/ops/cost-rules.js";
import { savedByLayer } from "../passes/autodiff.js";
import { BackwardWalk } from "../passes/backward-gradients.js";
import { forwardWorkingPeaks } from "../passes/forward-working-set.js";
import { firstGradientWrites, firstWriteByGroup, gradientOwners, type GradientWrite } from "../passes/gradient-writes.js";
import { meshRank } from "../plan/plan.js";
import type { ScheduleCosts } from "../schedule/costs.js";
import type { ShardPlan } from "../shard/types.js";
import type { Boundaries } from "./boundaries.js";
import type { ResolvedSettings } from "./resolve.js";
import type { StageAssignment } from "./stages.js";
import { sequenceSymbol } from "../graph/sequence.js";

/** Seconds of one layer for one micro-batch. */
export interface LayerTimes {
  readonly forward: number;
  /** Input gradients; for a layer marked @checkpoint this includes re-running its forward first. */
  readonly backwardInput: number;
  readonly backwardWeight: number;
}

/** Bytes one micro-batch keeps on a stage. */
export interface StageActivations {
  /** Everything the forward keeps for the backward, the stage input included (layers marked @checkpoint
   *  keep only their inputs). */
  readonly kept: number;
  /** The stage input alone: all a checkpointed (R) micro-batch keeps until its recompute. */
  readonly input: number;
  /** What W still reads once I has run. */
  readonly weightGrad: number;
  /** weightGrad by the layer whose I segment first reaches each tensor (the highest layer of the stage whose W
   *  reads it, or that makes it: I runs back to front), in the stage's layer order: held from there to the
   *  end of W, while the stash it may share tensors with drains layer by layer. */
  readonly weightGradByLayer: readonly { readonly layer: number; readonly bytes: number }[];
  /** `kept` less the input, by the layer that first keeps each tensor (the stage's layers in order): what
   *  that layer's forward adds and what its backward, the last to read it, releases. */
  readonly byLayer: readonly { readonly layer: number; readonly bytes: number }[];
  /** Per @checkpoint layer: what its recompute rebuilds on top of the stash, held while its backward runs. */
  readonly rebuilt: readonly { readonly layer: number; readonly bytes: number }[];
  /** Per layer (in backward order): the activation gradients its backward holds at once, on top of the
   *  stash (src/passes/backward-gradients.ts). */
  readonly gradients: readonly { readonly layer: number; readonly bytes: number }[];
  /** Per layer (in forward order): the forward values a forward (or recompute) that keeps the stash holds at
   *  once beyond it and the sends (src/passes/forward-working-set.ts). */
  readonly forward: readonly { readonly layer: number; readonly bytes: number }[];
  /** The same for a forward that keeps nothing but its input (a micro-batch recomputed later, R); walked only
   *  when the plan recomputes micro-batches, else `forward` itself. */
  readonly forwardAlone: readonly { readonly layer: number; readonly bytes: number }[];
  /** The first backward's activation gradients where it alone makes the stage's gradient buffers, each
   *  counted from the op that first writes it (it is priced from its layer's start); later backwards find
   *  them made (`gradients`). Replicated and OSS stages (not split backwards): each parameter's accumulator,
   *  with the stage's gradient bytes by the layer of the first backward that creates it (`gradientsByLayer`);
   *  FSDP under no_sync: each unit's one gradient buffer of the step. */
  readonly firstBackward?: {
    readonly gradientsByLayer?: readonly { readonly layer: number; readonly bytes: number }[];
    readonly gradients: readonly { readonly layer: number; readonly bytes: number }[];
  };
  /** ShardedDDP (not split backwards): the layer whose backward first writes a gradient of the stage, where
   *  a micro-batch's staged buckets begin (collectives.ts stagedLifetimes). */
  readonly gradientsFrom?: number;
}

export class StageCostModel implements ScheduleCosts {
  readonly layers: readonly LayerTimes[];
  readonly activations: readonly StageActivations[];
  /** Forward + backward FLOPs of one micro-batch through the whole model (no recompute). */
  readonly flopsPerMicroBatch: number;
  private readonly sendBytes: readonly number[];
  private readonly sendLayers: readonly { readonly forward: number; readonly backward: number }[];
  private readonly sums: readonly { f: number; i: number; w: number }[];

  constructor(
    training: Graph,
    private readonly stages: readonly StageAssignment[],
    boundaries: Boundaries,
    private readonly cluster: Cluster,
    private readonly settings: ResolvedSettings,
    private readonly shards: readonly ShardPlan[],
  ) {
    const bindings: DimBindings = settings.seq === undefined ? { B: settings.microBatchSize } : { B: settings.microBatchSize, S: sequenceSymbol(training, settings.seq) };
    const cost = costGraph(training, { cluster, precision: settings.precision, bindings });
    // Layers recomputed inside their backward: @checkpoint ones and those the search's selective
    // checkpointing chose.
    const recompute = new Set(settings.recomputeLayers);
    const annotated = training.layers().map((l) => l.annotations.checkpoint === true || recompute.has(l.index));
    // costGraph gives one backward time per op; it is split between input and weight gradients in
    // proportion to their FLOPs (as src/shard/layer-times.ts does).
    this.layers = cost.layers.map((l, i) => {
      const flops = l.backwardFlops.input + l.backwardFlops.weight;
      const weightShare = flops > 0 ? l.backwardFlops.weight / flops : 0;
      const recompute = annotated[i] ? l.forwardSeconds : 0;
      return { forward: l.forwardSeconds, backwardInput: l.backwardSeconds * (1 - weightShare) + recompute, backwardWeight: l.backwardSeconds * weightShare };
    });
    this.flopsPerMicroBatch = cost.layers.reduce((n, l) => n + l.forwardFlops + l.backwardFlops.input + l.backwardFlops.weight, 0);
    this.sums = stages.map((s) => {
      let f = 0;
      let i = 0;
      let w = 0;
      for (let l = s.start; l < s.end; l++) {
        f += this.layers[l]!.forward;
        i += this.layers[l]!.backwardInput;
        w += this.layers[l]!.backwardWeight;
      }
      return { f, i, w };
    });
    // Each tensor's bytes found once (by tensor id, −1 until found): every stage walk asks again.
    const sizes = new Float64Array(training.tensors().length).fill(-1);
    const bytes = (t: TensorId): number => {
      if (sizes[t]! < 0) sizes[t] = bytesOf(onDevice(training.tensor(t).type, settings.precision), bindings);
      return sizes[t]!;
    };
    const total = (ts: Iterable<TensorId>): number => {
      let n = 0;
      for (const t of ts) n += bytes(t);
      return n;
    };
    this.sendBytes = boundaries.sends.map(total);
    // Where in its compute action each stage's sent value is first made: the forward's sends in the first
    // layer producing one of them; the backward's (the gradient of the stage's inputs) in the first layer, in
    // backward order, that reads what the stage receives (model inputs such as targets have no gradient).
    const layerOf = (op: number): number => training.op(op).layer;
    this.sendLayers = stages.map((st, k) => {
      const made = boundaries.sends[k]!.map((t) => training.tensor(t).producer).filter((o): o is number => o !== undefined).map(layerOf);
      const received = k > 0 ? boundaries.sends[k - 1]! : [];
      const reads = received.flatMap((t) => training.consumers(t)).map(layerOf).filter((l) => l >= st.start && l < st.end);
      return { forward: made.length > 0 ? Math.max(st.start, Math.min(...made)) : st.end - 1, backward: reads.length > 0 ? Math.max(...reads) : st.start };
    });
    // Kernels that compute in f32 give each 16-bit operand or result an f32 twin while its op runs.
    const scratch = opScratch(cluster.profile, training, settings.precision, bindings);
    // Replicated or optimizer-sharded stages add each micro-batch's parameter gradient to the step's
    // accumulator, so it is made in a buffer of its own first (fsdp and sddp write straight into the
    // micro-batch's flat buffer, priced by the collective placement).
    const staged = shards.map((sh) => sh.strategy === "none" || sh.strategy === "oss");
    // Where each backward creates its gradient buffers: not for split backwards (zero_bubble), whose
    // gradients begin in W, after the input-gradient working set is gone.
    const owners = settings.schedule === "zero_bubble" ? undefined : gradientOwners(training);
    this.activations = stageActivations(training, stages, boundaries, {
      annotated,
      bytes,
      total,
      scratch,
      staged,
      partial: weightGradientBytes(training, bindings),
      recomputes: settings.checkpoint === "always" || settings.checkpoint === "except_last",
      splitBackward: settings.schedule === "zero_bubble",
      gradientBuffers: stages.map((st, k) => (owners ? gradientBuffers(firstGradientWrites(training, st.start, st.end, owners), shards[k]!) : undefined)),
    });
  }

  forward(stage: number): number {
    return this.sums[stage]!.f;
  }
  backward(stage: number): number {
    return this.sums[stage]!.i + this.sums[stage]!.w;
  }
  backwardInput(stage: number): number {
    return this.sums[stage]!.i;
  }
  backwardWeight(stage: number): number {
    return this.sums[stage]!.w;
  }
  recompute(stage: number): number {
    return this.sums[stage]!.f;
  }
  /** The layer of a stage's forward (or backward) action from which the value it sends exists. */
  sendLayer(stage: number, direction: "forward" | "backward"): number {
    return this.sendLayers[stage]![direction];
  }

  boundaryBytes(stage: number, _mb: number, direction: "forward" | "backward"): number {
    // Backward out of stage s: the gradients of what stage s − 1 sent forward, same sizes.
    return direction === "forward" ? this.sendBytes[stage]! : stage > 0 ? this.sendBytes[stage - 1]! : 0;
  }
  /** Ranks here are pipeline ranks (the schedule's); replica 0 of each stands for all. */
  transfer(fromRank: number, toRank: number, bytes: number): number {
    const a = meshRank(this.settings, fromRank, 0);
    const b = meshRank(this.settings, toRank, 0);
    return collectiveTime("send_recv", bytes, 2, groupLink(this.cluster, [a, b]));
  }
  activationBytes(stage: number): number {
    return this.activations[stage]!.kept;
  }
  inputBytes(stage: number): number {
    return this.activations[stage]!.input;
  }
  weightGradBytes(stage: number): number {
    return this.activations[stage]!.weightGrad;
  }

  /**
   * The optimizer step of a stage on its fullest rank: an elementwise pass over the rank's model state,
   * read once and written once (Adam reads weights, gradient, moments and master weights and writes all but
   * the gradient back), so memory-bound: 2 × state bytes over the achievable memory bandwidth.
   */
  optimizer(stage: number): number {
    const device = this.cluster.profile;
    const bytes = this.shards[stage]!.memory.maxTotal;
    // A calibration that timed the update ops prices them by its measured time per byte of state instead.
    const measured = calibratedOptimizerSeconds(this.cluster, bytes);
    if (measured !== undefined) return measured;
    return (2 * bytes) / (device.memory.bandwidth * device.achievable.memory) + device.launchOverhead;
  }

  /** Layers of a stage in the order a compute action runs them. */
  layerOrder(stage: number, kind: string): number[] {
    const s = this.stages[stage]!;
    const up = Array.from({ length: s.end - s.start }, (_, i) => s.start + i);
    return kind === "F" || kind === "R" ? up : up.reverse();
  }

  /** Seconds of one layer inside a compute action of the given kind. */
  layerSeconds(kind: string, layer: number): number {
    const t = this.layers[layer]!;
    switch (kind) {
      case "F":
      case "R":
        return t.forward;
      case "B":
        return t.backwardInput + t.backwardWeight;
      case "I":
        return t.backwardInput;
      case "W":
        return t.backwardWeight;
      default:
        throw new Error(`internal: ${kind} is not a compute action with layers`);
    }
  }
}

/** How stageActivations prices a stage's values and working sets. */
interface ActivationPricing {
  /** Per layer: recomputed inside its backward (@checkpoint, selective). */
  readonly annotated: readonly boolean[];
  readonly bytes: (t: TensorId) => number;
  readonly total: (ts: Iterable<TensorId>) => number;
  readonly scratch: (op: number, dying: (t: TensorId) => boolean) => number;
  /** Per stage: a micro-batch's weight gradients are made apart and added to an accumulator (none/oss), each
   *  op's result costing `partial(op)` while it runs. */
  readonly staged: readonly boolean[];
  readonly partial: (op: number) => number;
  /** Some micro-batches are recomputed by an R (checkpoint always/except_last): their forward keeps nothing. */
  readonly recomputes: boolean;
  /** The backward is split into I and W (zero_bubble): W's inputs are held apart (weightGradByLayer). */
  readonly splitBackward: boolean;
  /** Per stage: where its backwards create their gradient buffers (undefined: from the backward's start). */
  readonly gradientBuffers: readonly (GradientBuffers | undefined)[];
}

function stageActivations(training: Graph, stages: readonly StageAssignment[], boundaries: Boundaries, pricing: ActivationPricing): StageActivations[] {
  const { annotated, bytes, total, scratch, staged, partial } = pricing;
  const saved = savedByLayer(training);
  // Tensors the weight-gradient ops read (besides model state): what a split backward's W still needs.
  const wReads = training.layers().map(() => new Set<TensorId>());
  for (const o of training.ops()) {
    if (o.phase !== "weight_grad") continue;
    for (const t of o.inputs) {
      const k = training.tensor(t).kind;
      if (k !== "param" && k !== "state") wReads[o.layer]!.add(t);
    }
  }
  return stages.map((s, k) => {
    const input = boundaries.inputs[k]!;
    const kept = new Set<TensorId>(input);
    // Each tensor W reads, by the highest layer of the stage reading it (set in ascending order: the last wins).
    const w = new Map<TensorId, number>();
    const byLayer: { layer: number; bytes: number }[] = [];
    const rebuilt: { layer: number; bytes: number }[] = [];
    // Per layer: what its backward frees as it reads it last (its stash, or the tensors its recompute rebuilt).
    const releasedBy = new Map<number, readonly TensorId[]>();
    for (let l = s.start; l < s.end; l++) {
      const layer = saved[l]!;
      const added: TensorId[] = [];
      for (const t of annotated[l] ? layer.boundary : layer.saved) {
        if (kept.has(t)) continue;
        kept.add(t);
        added.push(t);
      }
      byLayer.push({ layer: l, bytes: total(added) });
      if (annotated[l]) {
        // What its recompute adds to what the stash already holds (its input is kept anyway).
        const again = layer.saved.filter((t) => !kept.has(t));
        rebuilt.push({ layer: l, bytes: total(again) });
        releasedBy.set(l, [...added, ...again]);
      } else releasedBy.set(l, added);
      for (const t of wReads[l]!) w.set(t, l);
    }
    // A split backward's W inputs that its I makes (an output gradient a weight gradient reads: a head's logits
    // gradient) are held from the I segment that makes them, in W's buffers alone: counted in I's working set
    // as well, gpt2-124m's 785 MiB logits gradient was priced twice (the memory plan 1.11–1.22× the runtime's
    // arenas for its ZB-H1 plans).
    const madeByI = new Set<TensorId>();
    if (pricing.splitBackward) {
      for (const [t, l] of w) {
        const p = training.tensor(t).producer;
        if (p === undefined) continue;
        const o = training.op(p);
        if (o.phase !== "backward" || o.layer < s.start || o.layer >= s.end) continue;
        madeByI.add(t);
        w.set(t, Math.max(l, o.layer));
      }
    }
    const released = (l: number): readonly TensorId[] => releasedBy.get(l) ?? [];
    const sendsBack = k > 0 && boundaries.sends[k - 1]!.length > 0;
    const buffers = pricing.gradientBuffers[k];
    const backScratch = staged[k] ? (op: number, dying: (t: TensorId) => boolean): number => scratch(op, dying) + partial(op) : scratch;
    // Every backward of an FSDP stage makes its units' gradients, but under no_sync only the first (the
    // others add into them), and every backward of a ShardedDDP stage its micro-batch's staged buckets; a
    // replicated/OSS stage's first creates the accumulators, writing straight into them (no partial buffer),
    // and the later ones add partials.
    const made = buffers?.kind === "made" ? buffers.at : undefined;
    const madeAppear = made && ((op: number) => made.get(op) ?? 0);
    const firstOnly = buffers?.kind === "made" && buffers.firstBackwardOnly;
    const backward = new BackwardWalk(training, s.start, s.end, madeByI);
    const gradients = backward.peaks(bytes, released, backScratch, firstOnly ? undefined : madeAppear, sendsBack);
    const sends = new Set(boundaries.sends[k]!);
    const forward = forwardWorkingPeaks(training, s.start, s.end, bytes, new Set([...kept, ...sends]), scratch);
    const forwardAlone = pricing.recomputes ? forwardWorkingPeaks(training, s.start, s.end, bytes, sends, scratch) : forward;
    const firstBackward =
      buffers?.kind === "accumulators"
        ? { gradientsByLayer: buffers.byLayer, gradients: backward.peaks(bytes, released, scratch, (op) => buffers.at.get(op) ?? 0, sendsBack) }
        : firstOnly
          ? { gradients: backward.peaks(bytes, released, backScratch, madeAppear, sendsBack) }
          : undefined;
    const wByLayer = new Map<number, TensorId[]>();
    for (const [t, l] of w) {
      const list = wByLayer.get(l);
      if (list) list.push(t);
      else wByLayer.set(l, [t]);
    }
    const weightGradByLayer = [...wByLayer].sort((a, b) => a[0] - b[0]).map(([layer, ts]) => ({ layer, bytes: total(ts) }));
    const gradientsFrom = buffers?.kind === "made" ? buffers.firstLayer : undefined;
    return { kept: total(kept), input: total(input), weightGrad: total(w.keys()), weightGradByLayer, byLayer, rebuilt, gradients, forward, forwardAlone, ...(firstBackward && { firstBackward }), ...(gradientsFrom !== undefined && { gradientsFrom }) };
  });
}

/** Bytes of gradient buffers each op creates; for accumulators also the bytes by layer (their buffers); for
 *  ShardedDDP's staged buckets, the layer of the stage's first gradient write (FSDP's units begin at the
 *  first layer reading each: collectives.ts). */
type GradientBuffers =
  | { readonly kind: "made"; readonly at: ReadonlyMap<number, number>; readonly firstBackwardOnly: boolean; readonly firstLayer?: number }
  | { readonly kind: "accumulators"; readonly at: ReadonlyMap<number, number>; readonly byLayer: readonly { readonly layer: number; readonly bytes: number }[] };

/**
 * Where a stage's backward creates its gradient buffers, from its first write of each parameter's gradient.
 * FSDP: a unit's unsharded gradient (the reduce-scatter's full buffer) at the first write of any of its
 * parameters, in every backward, or under no_sync in the step's first only (the memory plan holds it from the
 * first layer that reads the unit). ShardedDDP: the micro-batch's staged reduce-to-owner buckets, one buffer
 * (collectives.ts stagedLifetimes) made at the stage's first gradient write, in every backward: the runtime
 * lays each bucket out from the first instruction that writes it.
 * Replicated and OSS: each parameter's accumulator (with replicas, its all-reduce bucket's), in the first
 * backward; the stage's gradient bytes (its fullest rank's, as the state buffers) shared out in proportion to
 * the elements. Others: none.
 */
function gradientBuffers(writes: readonly GradientWrite[], shard: ShardPlan): GradientBuffers | undefined {
  const at = new Map<number, number>();
  if (shard.strategy === "fsdp") {
    const unitOf = new Map(shard.units.flatMap((u) => u.params.map((m) => [m.name, u.index] as const)));
    const first = firstWriteByGroup(writes, (param) => unitOf.get(param));
    for (const c of shard.collectives) {
      if (c.kind !== "REDUCE_SCATTER" || c.of !== "unit") continue;
      const w = first.get(c.unit);
      if (w) at.set(w.op, (at.get(w.op) ?? 0) + c.bytes);
    }
    // no_sync: one gradient buffer per unit for the step, born in the step's first backward.
    return { kind: "made", at, firstBackwardOnly: shard.noSync };
  }
  if (shard.strategy === "sddp") {
    const bytes = shard.gradBuckets.reduce((n, b) => n + b.bytes, 0);
    const first = writes[0];
    return first && bytes > 0 ? { kind: "made", at: new Map([[first.op, bytes]]), firstBackwardOnly: false, firstLayer: first.layer } : undefined;
  }
  if (shard.strategy !== "none" && shard.strategy !== "oss") return undefined;
  const gradBytes = Math.max(0, ...shard.memory.perRank.map((r) => r.grad));
  const totalNumel = writes.reduce((n, x) => n + x.numel, 0);
  if (gradBytes === 0 || totalNumel === 0) return undefined;
  const scale = gradBytes / totalNumel;
  // With replicas the accumulators are views into their all-reduce bucket's flat buffer, which exists from
  // the first write of any of its parameters (as with DDP's gradient_as_bucket_view, where the buckets
  // even persist): a bucket's bytes at that write. gpt-tiny, one bucket, one micro-batch: the runtime held
  // 1.16-1.20x what the parameter-by-parameter count priced.
  const bucketOf = new Map<string, { readonly index: number; readonly numel: number }>();
  if (shard.ranks.length > 1) for (const b of shard.gradBuckets) for (const name of b.params) bucketOf.set(name, b);
  const begun = new Set<number>();
  const layerBytes = new Map<number, number>();
  for (const x of writes) {
    const bucket = bucketOf.get(x.param);
    if (bucket && begun.has(bucket.index)) continue;
    if (bucket) begun.add(bucket.index);
    const bytes = (bucket ? bucket.numel : x.numel) * scale;
    at.set(x.op, (at.get(x.op) ?? 0) + bytes);
    layerBytes.set(x.layer, (layerBytes.get(x.layer) ?? 0) + bytes);
  }
  return { kind: "accumulators", at, byLayer: [...layerBytes].map(([layer, bytes]) => ({ layer, bytes })) };
}
