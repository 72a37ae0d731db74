// Parameter ownership shared by OSS and ShardedDDP: the min-max partition (with FairScale's greedy beside it
// for the report) and the per-owner broadcast of updated weights after the optimizer step.
import type { ShardStrategy } from "../check/settings-types.js";
import { packOwnerBuckets } from "./buckets.js";
import { talks, type PlanContext } from "./context.js";
import { shardedBytesPerElement } from "./memory.js";
import { greedyPartition, minMaxPartition } from "./partition.js";
import { afterOptimizer } from "./points.js";
import type { Bucket, PartitionReport, ShardCollective } from "./types.js";

export function ownerPartition(ctx: PlanContext, strategy: ShardStrategy): PartitionReport {
  const sizes = ctx.params.map((p) => p.numel);
  const n = ctx.ranks.length;
  const budget = ctx.partitionNodeBudget;
  const chosen = minMaxPartition(sizes, n, budget === undefined ? {} : { nodeBudget: budget });
  const greedy = greedyPartition(sizes, n);
  const perElement = shardedBytesPerElement(strategy, ctx.bytes);
  return {
    chosen,
    greedy,
    bytesPerElement: perElement,
    largestShardBytes: chosen.largest * perElement,
    greedyLargestShardBytes: greedy.largest * perElement,
  };
}

export function ownerMap(ctx: PlanContext, partition: PartitionReport): Map<string, number> {
  return new Map(ctx.params.map((p, i) => [p.name, partition.chosen.owners[i]!]));
}

/** Each owner's updated weights (compute dtype) in declaration order, in size-capped buckets. */
export function broadcastBuckets(ctx: PlanContext, owners: ReadonlyMap<string, number>): Bucket[] {
  return packOwnerBuckets(ctx.params, owners, ctx.ranks.length, ctx.bytes.param, ctx.bucketCapBytes);
}

/** BROADCAST from the owner once its parameters are stepped (their optimizer ops sit in their layers). */
export function broadcastCollectives(ctx: PlanContext, buckets: readonly Bucket[]): ShardCollective[] {
  if (!talks(ctx)) return [];
  const layerOf = new Map(ctx.params.map((p) => [p.name, p.layer]));
  return buckets.map((b) => ({
    kind: "BROADCAST",
    of: "broadcastBucket",
    unit: b.index,
    bytes: b.bytes,
    group: ctx.ranks,
    root: ctx.ranks[b.owner!]!,
    at: afterOptimizer(b.params.reduce((a, name) => Math.max(a, layerOf.get(name)!), -Infinity)),
  }));
}
