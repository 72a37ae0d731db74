// `sddp` (ZeRO-2, FairScale ShardedDDP): optimizer state and gradients owned per parameter; each gradient
// bucket is REDUCEd to its owner as soon as its last gradient is ready, then owners broadcast as in OSS.
//
// Why REDUCE to the owner rather than a reduce-scatter of owner-aligned buckets: ownership is per parameter
// and the min-max partition gives ranks unequal, scattered sets of parameters, while a reduce-scatter hands
// every rank an equal contiguous slice. Aligning buckets to owners would force equal-sized pieces per rank
// in every bucket (splitting tensors, padding) and would lose the balanced partition. REDUCE per owner
// bucket is also what ShardedDDP does. Reduction happens every micro-batch so no rank ever accumulates a
// full gradient: that is what makes ZeRO-2's gradient memory (g·Ψ/N) hold.
import { packOwnerBuckets } from "./buckets.js";
import { REPLICATED, ownership, talks, type PlanContext, type StrategyParts } from "./context.js";
import { bucketReadyLayer } from "./ddp.js";
import { broadcastBuckets, broadcastCollectives, ownerMap, ownerPartition } from "./owners.js";
import { after } from "./points.js";
import { gradientReadyOrder } from "./stage-params.js";
import type { ShardCollective } from "./types.js";

export function sddpParts(ctx: PlanContext): StrategyParts {
  const partition = ownerPartition(ctx, "sddp");
  const owners = ownerMap(ctx, partition);
  const gradBuckets = packOwnerBuckets(gradientReadyOrder(ctx.params), owners, ctx.ranks.length, ctx.bytes.grad, ctx.bucketCapBytes);
  const bcast = broadcastBuckets(ctx, owners);
  const byName = new Map(ctx.params.map((p) => [p.name, p]));
  const reduces: ShardCollective[] = talks(ctx)
    ? gradBuckets.map((b) => ({
        kind: "REDUCE",
        of: "gradBucket",
        unit: b.index,
        bytes: b.bytes,
        group: ctx.ranks,
        root: ctx.ranks[b.owner!]!,
        at: after("weight_grad", bucketReadyLayer(b, byName), "each"),
      }))
    : [];
  return {
    params: ctx.params.map((p) => {
      const owner = { kind: "owner", rank: owners.get(p.name)! } as const;
      return ownership(p, REPLICATED, owner, owner);
    }),
    partition,
    gradBuckets,
    broadcastBuckets: bcast,
    units: [],
    collectives: [...reduces, ...broadcastCollectives(ctx, bcast)],
    frees: [],
    shardedElements: partition.chosen.loads,
  };
}
