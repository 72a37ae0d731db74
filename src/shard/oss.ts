// `oss` (ZeRO-1): optimizer state partitioned over the group; gradients still all-reduced whole as in DDP
// (every rank keeps full gradients), then each owner steps its parameters and broadcasts them.
import { REPLICATED, ownership, type PlanContext, type StrategyParts } from "./context.js";
import { allReduceBuckets, allReduceCollectives } from "./ddp.js";
import { broadcastBuckets, broadcastCollectives, ownerMap, ownerPartition } from "./owners.js";

export function ossParts(ctx: PlanContext): StrategyParts {
  const partition = ownerPartition(ctx, "oss");
  const owners = ownerMap(ctx, partition);
  const gradBuckets = allReduceBuckets(ctx);
  const bcast = broadcastBuckets(ctx, owners);
  return {
    params: ctx.params.map((p) => ownership(p, REPLICATED, REPLICATED, { kind: "owner", rank: owners.get(p.name)! })),
    partition,
    gradBuckets,
    broadcastBuckets: bcast,
    units: [],
    collectives: [...allReduceCollectives(ctx, gradBuckets), ...broadcastCollectives(ctx, bcast)],
    frees: [],
    shardedElements: partition.chosen.loads,
  };
}
