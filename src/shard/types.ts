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
  readonly layer: number;
  readonly numel: number;
  /** Layer whose weight_grad op completes this parameter's gradient; undefined for a parameter with none. */
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
  /** modelStateBytes of src/cost (the ZeRO formula) for the stage's parameters and group size. */
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
  readonly bytesPerParam: StateBytesPerParam;
  /** Parameters declared in the stage's layers, in declaration order. */
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
  /** Parameters of this stage also read by ops of layers outside it, or read here but declared elsewhere
   *  (weights tied across stages): their gradient sync across stages is the pipeline's job, not this plan's. */
  readonly crossStageParams: readonly string[];
}
