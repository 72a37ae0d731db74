// The shard plan of one pipeline stage: who holds which parameter, gradient and optimizer state across the
// stage's data-parallel group, and the collectives (with the step points they hang on) that one step needs.
import type { ShardStrategy } from "../check/settings-types.js";
import type { StateBytesPerParam } from "../cost/memory.js";
import type { Phase } from "../graph/graph.js";
import type { ShardKind } from "../schedule/action.js";
import type { OptimalPartition, Partition } from "./partition.js";

/** A half-open range of graph layer indices [start, end): the layers of one (virtual) pipeline stage. */
export interface LayerRange {
  readonly start: number;
  readonly end: number;
}

/**
 * A point of the training step a shard action hangs on: just before or just after the op of `phase` in
 * `layer` (forward and recompute run layers first to last, backward and weight_grad last to first; the
 * optimizer step runs once, after the last micro-batch).
 * `microBatch` says which micro-batches: `each` (the action repeats for every micro-batch), or only the
 * `first` / `last` occurrence of that op in the stage's compute order (for forward that is micro-batch 0's,
 * for backward and weight_grad the one that finishes the step's gradient accumulation).
 */
export interface StepPoint {
  readonly when: "before" | "after";
  readonly phase: Phase;
  readonly layer: number;
  readonly microBatch: "each" | "first" | "last";
}

/** Where one kind of model state (weights, gradients, optimizer state) of a parameter lives in the group. */
export type Holder =
  | { readonly kind: "replicated" }
  /** Only this group rank (an index into ShardPlan.ranks) holds it. */
  | { readonly kind: "owner"; readonly rank: number }
  /** Split evenly over the group as part of FSDP unit `unit`'s flat parameter (see FsdpUnit.shards). */
  | { readonly kind: "sharded"; readonly unit: number };

export interface ParamOwnership {
  readonly name: string;
  /** Its declaring layer, or for a replica of a weight declared on another stage the first layer here reading it. */
  readonly layer: number;
  readonly numel: number;
  /** Layer whose weight_grad op completes this stage's part of the gradient (all of it unless the weight is
   *  tied across stages); undefined for a parameter with none. */
  readonly gradLayer: number | undefined;
  readonly param: Holder;
  readonly grad: Holder;
  readonly optimizer: Holder;
}

/** A run of parameters whose gradients (or, for broadcast buckets, updated weights) travel in one collective. */
export interface Bucket {
  readonly index: number;
  /** Group rank that receives (REDUCE) or sends (BROADCAST) the bucket; absent for an all-reduce bucket. */
  readonly owner?: number;
  /** In the order they enter the bucket (gradient-ready order, or declaration order for broadcasts). */
  readonly params: readonly string[];
  readonly numel: number;
  readonly bytes: number;
}

/** One parameter inside an FSDP unit's flat parameter. */
export interface FlatMember {
  readonly name: string;
  /** Element offset in the flat parameter. */
  readonly offset: number;
  readonly numel: number;
}

/** The slice of a flat parameter one rank holds, and which parameters (element ranges) fall into it. */
export interface FlatShard {
  readonly rank: number;
  readonly offset: number;
  readonly numel: number;
  /** `from`/`to` are element offsets inside the parameter, half-open; padding belongs to no parameter. */
  readonly pieces: readonly { readonly name: string; readonly from: number; readonly to: number }[];
}

export interface FsdpUnit {
  readonly index: number;
  /** The root unit holds every stage parameter that no inner unit took (FairScale's outermost FSDP). */
  readonly root: boolean;
  /** Layers whose parameters the unit holds, ascending (a root unit's need not be consecutive). */
  readonly layers: readonly number[];
  /** First and last layer of the stage reading its parameters: the unit is gathered over this span. Wider
   *  than `layers` when a member is read again by another layer (a tied embedding read by the output layer
   *  of the same stage): freeing it after `layers` would leave that read without its weight. */
  readonly span: { readonly first: number; readonly last: number };
  /** Declaration order, packed from offset 0. */
  readonly params: readonly FlatMember[];
  readonly numel: number;
  /** numel rounded up to a multiple of the group size. */
  readonly paddedNumel: number;
  readonly padding: number;
  /** paddedNumel / group size: what each rank keeps. */
  readonly shardNumel: number;
  readonly shards: readonly FlatShard[];
}

export type ShardCollectiveKind = Exclude<ShardKind, "OPTIMIZER" | "FREE">;

/** One collective of a training step (repeated per micro-batch when `at.microBatch` is `each`). */
export interface ShardCollective {
  readonly kind: ShardCollectiveKind;
  /** What `unit` indexes: an FSDP unit, a gradient bucket or a broadcast bucket (Action.unit in the plan). */
  readonly of: "unit" | "gradBucket" | "broadcastBucket";
  readonly unit: number;
  /** The full buffer in the convention of src/cost/collectives.ts: gathered output, unreduced input. */
  readonly bytes: number;
  /** Global ranks of the group (ShardPlan.ranks). */
  readonly group: readonly number[];
  /** BROADCAST and REDUCE: the global rank that sends or receives. */
  readonly root?: number;
  /** `after` points are data dependencies (the gradients or weights it moves exist from then on); a
   *  `before` point is a deadline (the op cannot start until the collective is done). */
  readonly at: StepPoint;
}

/**
 * A shared weight the stage holds (Megatron-LM's "embedding group", for any parameter and any number of
 * stages). Every stage whose forward ops read it holds a full replica under its own shard strategy (sharded in
 * its data-parallel group like its other parameters), computes the partial gradient of its own reads, and
 * the partials are summed by a tied all-reduce (TiedCollective) so that every replica steps with the
 * single-device gradient. The replicas stay identical only if they start identical (copy the primary
 * stage's initial value) and every replica's update is deterministic: identical gradient bits in, identical
 * optimizer kernels, identical weights out (see TiedCollective for when the gradient bits match).
 */
export interface TiedParam {
  /** Canonical name (aliases resolve to it). */
  readonly name: string;
  readonly aliases: readonly string[];
  readonly numel: number;
  /** Layer that declares it, possibly on another stage. */
  readonly declaredLayer: number;
  /** Layers whose forward ops read it, every stage's, ascending. */
  readonly useLayers: readonly number[];
  /** Stages holding a replica (those with a read), ascending. One entry: every read is on one stage and no
   *  collective is needed (the single-device case, or a weight that moved to the stage reading it). */
  readonly stages: readonly number[];
  /** stages[0]: the replica the others copy at initialization, and the only one counted in the global
   *  gradient norm for clipping (counting every replica would count its gradient once per stage). */
  readonly primaryStage: number;
  /** Layers of this stage reading it, ascending. */
  readonly localUseLayers: readonly number[];
  /** Layer whose weight_grad completes this stage's partial gradient (its lowest local read: backward runs
   *  last layer to first); undefined when untrained. */
  readonly gradLayer: number | undefined;
  /** Index of its tied all-reduce in ShardPlan.tiedCollectives; absent with one stage or no gradient. */
  readonly collective?: number;
}

/**
 * The all-reduce summing a tied weight's partial gradients across the stages holding it, for one data-parallel
 * replica index (see `rule`). Order relative to the stage's own gradient reduction, chosen so the sum equals
 * the single-device gradient Σ_stages Σ_replicas Σ_micro-batches g:
 *   none, oss: AFTER the data-parallel all-reduce of the weight's bucket, once per step. That all-reduce
 *     leaves the replica-summed gradient whole on every rank, so the tied all-reduce is the last operation on
 *     it and hands its members identical bits (Megatron-LM's order); with three or more stages the groups of
 *     different replica indices must also sum in the same order (deterministic collectives).
 *   fsdp, sddp: BEFORE the stage's reduce-scatter / reduce of the weight, every micro-batch. Those reduce each
 *     micro-batch into one rank's shard (owner), at stage-specific places (unit layouts and owners differ
 *     between stages), so summing afterwards would add unrelated pieces (Megatron-LM issue #844); before it
 *     the partial is still whole on every rank. Identical replicas then also need each stage's reduction to
 *     sum the (identical) inputs in the same order: deterministic collectives, and for three or more
 *     replicas the same element order in the stages' buffers.
 * In a group of one there is no stage reduction and the all-reduce runs once per step. It sums, never
 * averages: the stages' partials are parts of one gradient, not copies of it as data-parallel replicas' are.
 * The per-micro-batch form pairs the stages' instances by micro-batch, so every participating stage must
 * finish its micro-batches' weight gradients in the same order; it is a rendezvous every micro-batch (the
 * last stage's partial is ready some p−1 stage-backwards before the first stage's), which a runtime should
 * keep off the stream of its other collectives. A cheaper fsdp/sddp form (a unit or bucket of its own per
 * tied weight, so that shards line up across stages, summed once per step after the reduction) is not
 * implemented.
 */
export interface TiedCollective {
  readonly kind: "ALL_REDUCE";
  readonly of: "tiedGrad";
  /** Canonical name of the weight (its ShardPlan.tied entry). */
  readonly param: string;
  /** Action.unit of the ALL_REDUCE: numbered after the stage's gradient buckets (gradBuckets.length + its
   *  index in tiedCollectives) so that it never shares a unit with a bucket's ALL_REDUCE. */
  readonly unit: number;
  /** The weight's full gradient in the gradient dtype: numel · bytesPerParam.grad. */
  readonly bytes: number;
  /** Participating stages, ascending (TiedParam.stages). */
  readonly stages: readonly number[];
  /** `sameReplica`: one all-reduce per replica index r, over group rank r of every stage in `stages` (the r-th
   *  entry of each stage plan's `ranks`): replica r of stage 0 with replica r of stage p−1. All participating
   *  stages must have the same strategy and group size; tiedGroups builds the rank lists and checks that. */
  readonly rule: "sameReplica";
  /** The stage's own gradient collective carrying the weight (an index into ShardPlan.collectives: its
   *  bucket's ALL_REDUCE or REDUCE, its unit's REDUCE_SCATTER) and which runs first; absent in a group of one. */
  readonly reduction?: { readonly collective: number; readonly order: "tiedFirst" | "reductionFirst" };
  /** After weight_grad of the reduction's layer (reductionFirst) or of the stage's last local contribution
   *  (tiedFirst), for the `last` micro-batch, or `each` under fsdp/sddp. */
  readonly at: StepPoint;
}

/** Release of an FSDP unit's gathered (unsharded) parameters. */
export interface ShardFree {
  readonly unit: number;
  readonly bytes: number;
  readonly at: StepPoint;
}

export interface RankStateBytes {
  readonly param: number;
  readonly grad: number;
  readonly optimizer: number;
  readonly total: number;
}

export interface PartitionReport {
  /** The partition in use: min-max over arbitrary assignments (see partition.ts). */
  readonly chosen: OptimalPartition;
  /** FairScale OSS's greedy on the same parameters, for comparison. */
  readonly greedy: Partition;
  /** Bytes per element that the partition shards (K for oss, g + K for sddp). */
  readonly bytesPerElement: number;
  readonly largestShardBytes: number;
  readonly greedyLargestShardBytes: number;
}

export interface ShardMemory {
  /** Persistent model state per group rank, padding and partition imbalance included. */
  readonly perRank: readonly RankStateBytes[];
  readonly maxTotal: number;
  /** modelStateBytes of src/cost (the ZeRO formula) for the stage's parameters and group size. The parameter
   *  count includes the stage's replicas of tied weights (ShardPlan.tied): each stage holding one pays its
   *  full state under its own strategy, so the formula applies per stage with Ψ = every parameter held. */
  readonly zeroFormula: number;
  /** Elements the strategy shards beyond the formula's ⌈Ψ/N⌉ on the fullest rank: FSDP padding, or the
   *  OSS/ShardedDDP largest shard minus ⌈Ψ/N⌉. maxTotal = zeroFormula + shardedBytesPerElement · excess. */
  readonly excessElements: number;
  readonly shardedBytesPerElement: number;
}

export interface ShardPlan {
  readonly strategy: ShardStrategy;
  /** Virtual stage index (Action.stage of the shard actions). */
  readonly stage: number;
  readonly layers: LayerRange;
  readonly groupSize: number;
  /** Global ranks of the group, by group rank. */
  readonly ranks: readonly number[];
  /** fsdp: ranks of each shard group, consecutive group ranks: group rank r holds shard r mod shardGroup of
   *  every unit (FsdpUnit.shards), and ranks r, r + shardGroup, ... are replicas of each other (hybrid
   *  sharding when below groupSize). groupSize for every other strategy. */
  readonly shardGroup: number;
  /** fsdp: each unit's gradient reduce-scattered once per step (no_sync). */
  readonly noSync: boolean;
  readonly bytesPerParam: StateBytesPerParam;
  /** Parameters the stage holds, in declaration order: those its layers read (replicas of weights tied across
   *  stages included) and unread ones declared in its layers. */
  readonly params: readonly ParamOwnership[];
  /** oss and sddp. */
  readonly partition?: PartitionReport;
  /** none and oss: all-reduce buckets; sddp: reduce-to-owner buckets. */
  readonly gradBuckets: readonly Bucket[];
  /** oss and sddp: per-owner buckets of updated weights broadcast after the step. */
  readonly broadcastBuckets: readonly Bucket[];
  /** fsdp, in order of first forward use. */
  readonly units: readonly FsdpUnit[];
  /** In the order they are generated: gradient collectives in gradient-ready order, then broadcasts; for
   *  fsdp per unit. Empty for a group of one (nobody to talk to). */
  readonly collectives: readonly ShardCollective[];
  readonly frees: readonly ShardFree[];
  readonly memory: ShardMemory;
  /** Shared weights the stage holds: read by several layers, outside their declaring layer, or under an
   *  alias; with the stages holding replicas and, for those on several stages, their tied all-reduce. */
  readonly tied: readonly TiedParam[];
  /** One per weight tied across stages that has a gradient, in the order of `tied`. Not in `collectives`:
   *  their groups span stages (see TiedCollective.rule), while every entry there runs over `ranks`. */
  readonly tiedCollectives: readonly TiedCollective[];
  /** Names of the `tied` entries held by more than one stage, sorted. */
  readonly crossStageParams: readonly string[];
}
