// A ShardSpec from a checked model's train and parallel settings, once the planner has fixed every `auto`.
import type { ParallelConfig, ShardStrategy, TrainConfig } from "../check/settings-types.js";
import type { Graph } from "../graph/graph.js";
import type { ShardSpec } from "./plan.js";
import type { LayerRange } from "./types.js";

export interface StagePlacement {
  /** Global ranks of the stage's data-parallel group. */
  readonly ranks: readonly number[];
  readonly layers?: LayerRange;
  readonly stage?: number;
  /** The planner's choices for settings the file left `auto`. */
  readonly shard?: ShardStrategy;
  readonly reshardAfterForward?: boolean;
}

export function shardSpecFromSettings(training: Graph, train: TrainConfig, parallel: ParallelConfig, at: StagePlacement): ShardSpec {
  const strategy = parallel.shard === "auto" ? at.shard : parallel.shard;
  if (strategy === undefined) throw new Error("internal: shard = auto must be resolved by the planner before shard planning");
  const reshard = parallel.reshardAfterForward === "auto" ? at.reshardAfterForward : parallel.reshardAfterForward;
  if (strategy === "fsdp" && reshard === undefined) {
    throw new Error("internal: reshard_after_forward = auto must be resolved by the planner before FSDP shard planning");
  }
  return {
    graph: training,
    strategy,
    precision: train.precision,
    reduceDtype: train.reduceDtype,
    optimizer: train.optimizer,
    ranks: at.ranks,
    ...(at.layers && { layers: at.layers }),
    ...(at.stage !== undefined && { stage: at.stage }),
    bucketMB: parallel.bucketMB,
    fsdpMinParams: parallel.fsdpMinParams,
    ...(reshard !== undefined && { reshardAfterForward: reshard }),
  };
}
