// buildShardPlan: one stage's shard plan from its training graph, group and settings; the entry point of src/shard.
import type { Optimizer, Precision, ShardStrategy } from "../check/settings-types.js";
import { stateBytesPerParam, type OptimizerSpec } from "../cost/memory.js";
import type { Graph } from "../graph/graph.js";
import { bucketCapBytes } from "./buckets.js";
import type { PlanContext, StrategyParts } from "./context.js";
import { ddpParts } from "./ddp.js";
import { fsdpParts } from "./fsdp.js";
import { shardMemory } from "./memory.js";
import { ossParts } from "./oss.js";
import { sddpParts } from "./sddp.js";
import { layerStages, paramUses, type ParamUse } from "./sharing.js";
import { checkLayerRange, stageParams } from "./stage-params.js";
import { sharedParams, tiedCollectives } from "./tied.js";
import type { LayerRange, ShardPlan } from "./types.js";

export const DEFAULT_BUCKET_MB = 25;
export const DEFAULT_FSDP_MIN_PARAMS = 1e8;

export interface ShardSpec {
  /** The training graph (buildTrainingGraph): gradient-ready order comes from its backward ops. */
  readonly graph: Graph;
  readonly strategy: ShardStrategy;
  readonly precision: Precision;
  readonly optimizer: OptimizerSpec | Optimizer;
  /** What gradients are held and reduced in (train.reduce_dtype). */
  readonly reduceDtype: Precision;
  /** Global ranks of the stage's data-parallel group, by group rank; the group size is its length. */
  readonly ranks: readonly number[];
  /** The stage's layers (default: pipeline.stages[stage], else every layer, a single-stage plan). */
  readonly layers?: LayerRange;
  /** Virtual stage index for the shard actions (default 0). */
  readonly stage?: number;
  /** Every (virtual) stage's layers by stage index, cutting the layers in order. Needed when the stage shares
   *  a weight with another stage (a tied embedding): it names the stages of the tied all-reduce. */
  readonly pipeline?: PipelineLayout;
  /** Gradient (and broadcast) bucket cap in MiB (default 25, PyTorch DDP's). */
  readonly bucketMB?: number;
  /** Size-based FSDP unit threshold in parameters (default 1e8), used when no layer is @fsdp_unit. */
  readonly fsdpMinParams?: number;
  /** FSDP: free gathered weights after forward and gather again for backward (default true). */
  readonly reshardAfterForward?: boolean;
  /** fsdp: ranks of each shard group, consecutive group ranks (default: the whole group). Smaller groups
   *  hold replicas of the sharded state and all-reduce their gradient shards once per step (hybrid sharding,
   *  FSDP2's 2-D mesh, ZeRO++'s hpZ). */
  readonly shardGroup?: number;
  /** fsdp: reduce-scatter each unit once per step, accumulating its unsharded gradient over the micro-batches
   *  (FairScale's and FSDP's no_sync) rather than after every micro-batch (default false). */
  readonly noSync?: boolean;
  /** Node budget of the OSS/ShardedDDP min-max partition search (see partition.ts). */
  readonly partitionNodeBudget?: number;
  /** `paramUses(graph)`, when the caller plans several stages of one graph: it walks every parameter's
   *  consumers and gradient ops, so computing it once per graph rather than once per stage saves real time
   *  on large models (default: computed here). */
  readonly uses?: readonly ParamUse[];
}

export interface PipelineLayout {
  readonly stages: readonly LayerRange[];
}

function checkRanks(ranks: readonly number[]): void {
  if (ranks.length === 0) throw new Error("internal: a shard group needs at least one rank");
  if (!ranks.every((r) => Number.isSafeInteger(r) && r >= 0)) {
    throw new Error(`internal: shard group ranks must be non-negative integers, got [${ranks.join(", ")}]`);
  }
  if (new Set(ranks).size !== ranks.length) throw new Error(`internal: shard group ranks repeat: [${ranks.join(", ")}]`);
}

function checkShardGroup(size: number, ranks: number): number {
  if (!Number.isSafeInteger(size) || size < 1 || ranks % size !== 0) {
    throw new Error(`internal: a shard group of ${size} does not divide the stage's ${ranks} data-parallel ranks`);
  }
  return size;
}

/** Ranks start, start + stride, ... (n of them): a stage's data-parallel group in a (pipeline × data) mesh. */
export function groupRanks(n: number, start = 0, stride = 1): number[] {
  if (!Number.isInteger(n) || n < 1) throw new Error(`internal: a shard group needs a positive size, got ${n}`);
  return Array.from({ length: n }, (_, i) => start + i * stride);
}

export function buildShardPlan(spec: ShardSpec): ShardPlan {
  checkRanks(spec.ranks);
  const stage = spec.stage ?? 0;
  if (!Number.isSafeInteger(stage) || stage < 0) throw new Error(`internal: stage must be a non-negative integer, got ${stage}`);
  const stageOf = spec.pipeline && layerStages(spec.graph, spec.pipeline.stages);
  const layers = spec.layers ?? spec.pipeline?.stages[stage] ?? { start: 0, end: spec.graph.layers().length };
  checkLayerRange(spec.graph, layers);
  const own = spec.pipeline?.stages[stage];
  if (spec.pipeline && !(own && own.start === layers.start && own.end === layers.end)) {
    const given = own ? `[${own.start}, ${own.end})` : "no layers";
    throw new Error(`internal: stage ${stage} has layers [${layers.start}, ${layers.end}) but the pipeline gives it ${given}`);
  }
  const uses = spec.uses ?? paramUses(spec.graph);
  const params = stageParams(spec.graph, layers, uses);
  const shared = sharedParams(uses, params, layers, stage, stageOf);
  const bytes = stateBytesPerParam(spec.precision, spec.optimizer, spec.reduceDtype);
  const ctx: PlanContext = {
    layers: spec.graph.layers().slice(layers.start, layers.end),
    params,
    ranks: [...spec.ranks],
    bytes,
    bucketCapBytes: bucketCapBytes(spec.bucketMB ?? DEFAULT_BUCKET_MB),
    fsdpMinParams: spec.fsdpMinParams ?? DEFAULT_FSDP_MIN_PARAMS,
    reshardAfterForward: spec.reshardAfterForward ?? true,
    shardGroup: spec.strategy === "fsdp" ? checkShardGroup(spec.shardGroup ?? spec.ranks.length, spec.ranks.length) : spec.ranks.length,
    noSync: spec.strategy === "fsdp" && spec.noSync === true,
    partitionNodeBudget: spec.partitionNodeBudget,
  };
  const parts: StrategyParts =
    spec.strategy === "none" ? ddpParts(ctx) : spec.strategy === "oss" ? ossParts(ctx) : spec.strategy === "sddp" ? sddpParts(ctx) : fsdpParts(ctx);
  const tied = tiedCollectives(spec.strategy, ctx, parts, shared);
  // Ψ counts the stage's replicas of tied weights: each holder keeps their full state under its strategy.
  const psi = params.reduce((n, p) => n + p.numel, 0);
  const plan: ShardPlan = {
    strategy: spec.strategy,
    stage,
    layers: { start: layers.start, end: layers.end },
    groupSize: ctx.ranks.length,
    ranks: ctx.ranks,
    shardGroup: ctx.shardGroup,
    noSync: ctx.noSync,
    bytesPerParam: bytes,
    params: parts.params,
    gradBuckets: parts.gradBuckets,
    broadcastBuckets: parts.broadcastBuckets,
    units: parts.units,
    collectives: parts.collectives,
    frees: parts.frees,
    memory: shardMemory(spec.strategy, bytes, spec.precision, spec.optimizer, spec.reduceDtype, psi, parts.shardedElements, ctx.shardGroup),
    tied: tied.tied,
    tiedCollectives: tied.collectives,
    crossStageParams: tied.tied.filter((t) => t.stages.length > 1).map((t) => t.name).sort(),
  };
  return parts.partition ? { ...plan, partition: parts.partition } : plan;
}
