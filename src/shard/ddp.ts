// `none` (DDP): every rank keeps everything; gradients are all-reduced in size-capped buckets filled in the
// order gradients become ready, once per step after the last micro-batch (accumulation needs no sync).
import { packBuckets } from "./buckets.js";
import { REPLICATED, ownership, talks, type PlanContext, type StrategyParts } from "./context.js";
import { after } from "./points.js";
import { gradientReadyOrder, type StageParam } from "./stage-params.js";
import type { Bucket, ShardCollective } from "./types.js";

/**
 * All-reduce buckets in gradient-ready order. PyTorch DDP fills buckets in reverse declaration order as an
 * estimate of that order; the training graph gives the order itself (it differs for tied weights, whose
 * gradient completes at their first use, and inside a layer).
 */
export function allReduceBuckets(ctx: PlanContext): Bucket[] {
  return packBuckets(gradientReadyOrder(ctx.params), ctx.bytes.grad, ctx.bucketCapBytes);
}

/** The point a bucket's gradients are all complete: after the weight_grad of its last-ready member's layer. */
export function bucketReadyLayer(bucket: Bucket, byName: ReadonlyMap<string, StageParam>): number {
  return byName.get(bucket.params[bucket.params.length - 1]!)!.gradLayer!;
}

export function allReduceCollectives(ctx: PlanContext, buckets: readonly Bucket[]): ShardCollective[] {
  if (!talks(ctx)) return [];
  const byName = new Map(ctx.params.map((p) => [p.name, p]));
  return buckets.map((b) => ({
    kind: "ALL_REDUCE",
    of: "gradBucket",
    unit: b.index,
    bytes: b.bytes,
    group: ctx.ranks,
    at: after("weight_grad", bucketReadyLayer(b, byName), "last"),
  }));
}

export function ddpParts(ctx: PlanContext): StrategyParts {
  const gradBuckets = allReduceBuckets(ctx);
  return {
    params: ctx.params.map((p) => ownership(p, REPLICATED, REPLICATED, REPLICATED)),
    gradBuckets,
    broadcastBuckets: [],
    units: [],
    collectives: allReduceCollectives(ctx, gradBuckets),
    frees: [],
    shardedElements: ctx.ranks.map(() => 0),
  };
}
