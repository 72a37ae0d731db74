// What every strategy builder reads (the stage's parameters and group, resolved settings) and what it returns.
import type { StateBytesPerParam } from "../cost/memory.js";
import type { LayerInfo } from "../graph/graph.js";
import type { StageParam } from "./stage-params.js";
import type { Holder, ParamOwnership, ShardPlan } from "./types.js";

export interface PlanContext {
  readonly layers: readonly LayerInfo[];
  /** Declaration order. */
  readonly params: readonly StageParam[];
  /** Global ranks by group rank. */
  readonly ranks: readonly number[];
  readonly bytes: StateBytesPerParam;
  readonly bucketCapBytes: number;
  readonly fsdpMinParams: number;
  readonly reshardAfterForward: boolean;
  /** fsdp: ranks of each shard group (consecutive group ranks); below ranks.length the groups are replicas
   *  (hybrid sharding). ranks.length for every other strategy. */
  readonly shardGroup: number;
  /** fsdp: each unit reduce-scattered once per step, its unsharded gradient accumulated until then. */
  readonly noSync: boolean;
  readonly partitionNodeBudget: number | undefined;
}

/** The strategy-specific fields of a ShardPlan (same meanings), plus what memory accounting needs. */
export interface StrategyParts
  extends Pick<ShardPlan, "params" | "partition" | "gradBuckets" | "broadcastBuckets" | "units" | "collectives" | "frees"> {
  /** Per group rank: elements of sharded state it keeps (ignored by `none`). */
  readonly shardedElements: readonly number[];
}

export const REPLICATED: Holder = { kind: "replicated" };

export function ownership(p: StageParam, param: Holder, grad: Holder, optimizer: Holder): ParamOwnership {
  return { name: p.name, layer: p.layer, numel: p.numel, gradLayer: p.gradLayer, param, grad, optimizer };
}

/** A group of one has nobody to talk to: its plans carry no collectives. */
export function talks(ctx: PlanContext): boolean {
  return ctx.ranks.length > 1;
}
