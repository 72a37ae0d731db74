// `fsdp` (ZeRO-3): every unit's flat parameter, gradient and optimizer state split evenly over the group;
// the unit is all-gathered before use, freed after, and its gradient reduce-scattered once complete.
import { ownership, talks, type PlanContext, type StrategyParts } from "./context.js";
import { fsdpUnits } from "./fsdp-units.js";
import { after, before } from "./points.js";
import type { FsdpUnit, Holder, ShardCollective, ShardFree } from "./types.js";

/**
 * Per unit, with f / l the first and last layer of its span and r the layer that completes its gradients:
 *   resharding (reshardAfterForward, not the root unit), every micro-batch:
 *     ALL_GATHER before forward of f, FREE after forward of l,
 *     ALL_GATHER before backward of l, FREE after backward of f;
 *   otherwise: ALL_GATHER before forward of f for the first micro-batch, FREE after backward of f for the
 *     last (the weights stay gathered across the step, as reshard_after_forward=False keeps them);
 *   REDUCE_SCATTER after weight_grad of r, every micro-batch: reducing per micro-batch (into the owned
 *     gradient shard) keeps gradient memory at g·Ψ/N, the ZeRO-3 figure; with no_sync only for the last
 *     micro-batch, the earlier ones accumulating into the unit's unsharded gradient (g·Ψ held across the
 *     step for m − 1 fewer reduce-scatters, FairScale's and FSDP's no_sync);
 *   hybrid sharding (a shard group of s < N ranks): the gathers and reduce-scatters run inside the shard
 *     group, then once per step, right after the unit's last reduce-scatter, an ALL_REDUCE of its gradient
 *     shard over the N/s replicas of that shard (FSDP2's HSDP: reduce-scatter within, all-reduce across).
 * Each collective's `group` is the one of group rank 0 (every shard group and every replica group is laid
 * out alike, which is what the cost model needs); the runtime takes its own device's.
 * The root unit never reshards after forward, as in FairScale: its weights (usually the first and last
 * layers) are needed again as soon as the backward starts.
 */
export function unitActions(ctx: PlanContext, u: FsdpUnit): { collectives: ShardCollective[]; frees: ShardFree[] } {
  if (!talks(ctx)) return { collectives: [], frees: [] };
  const { first, last } = u.span;
  const shardRanks = ctx.ranks.slice(0, ctx.shardGroup);
  const gathered = u.paddedNumel * ctx.bytes.param;
  const gather = (at: ShardCollective["at"]): ShardCollective => ({
    kind: "ALL_GATHER",
    of: "unit",
    unit: u.index,
    bytes: gathered,
    group: shardRanks,
    at,
  });
  const free = (at: ShardFree["at"]): ShardFree => ({ unit: u.index, bytes: gathered, at });
  const collectives: ShardCollective[] = [];
  const frees: ShardFree[] = [];
  if (ctx.reshardAfterForward && !u.root) {
    collectives.push(gather(before("forward", first, "each")), gather(before("backward", last, "each")));
    frees.push(free(after("forward", last, "each")), free(after("backward", first, "each")));
  } else {
    collectives.push(gather(before("forward", first, "first")));
    frees.push(free(after("backward", first, "last")));
  }
  const members = new Set(u.params.map((m) => m.name));
  const gradLayers = ctx.params.filter((p) => members.has(p.name) && p.gradLayer !== undefined).map((p) => p.gradLayer!);
  if (gradLayers.length > 0) {
    // Backward runs last layer to first: the lowest layer is where the unit's last gradient completes.
    const done = gradLayers.reduce((a, b) => Math.min(a, b), Infinity);
    collectives.push({
      kind: "REDUCE_SCATTER",
      of: "unit",
      unit: u.index,
      bytes: u.paddedNumel * ctx.bytes.grad,
      group: shardRanks,
      at: after("weight_grad", done, ctx.noSync ? "last" : "each"),
    });
    if (ctx.shardGroup < ctx.ranks.length) {
      collectives.push({
        kind: "ALL_REDUCE",
        of: "unit",
        unit: u.index,
        bytes: u.shardNumel * ctx.bytes.grad,
        group: ctx.ranks.filter((_, r) => r % ctx.shardGroup === 0),
        at: after("weight_grad", done, "last"),
      });
    }
  }
  return { collectives, frees };
}

export function fsdpParts(ctx: PlanContext): StrategyParts {
  const units = fsdpUnits(ctx.layers, ctx.params, ctx.shardGroup, ctx.fsdpMinParams);
  const unitOf = new Map<string, number>();
  for (const u of units) for (const m of u.params) unitOf.set(m.name, u.index);
  const collectives: ShardCollective[] = [];
  const frees: ShardFree[] = [];
  for (const u of units) {
    const a = unitActions(ctx, u);
    collectives.push(...a.collectives);
    frees.push(...a.frees);
  }
  const perRank = units.reduce((n, u) => n + u.shardNumel, 0);
  return {
    params: ctx.params.map((p) => {
      const h: Holder = { kind: "sharded", unit: unitOf.get(p.name)! };
      return ownership(p, h, h, h);
    }),
    gradBuckets: [],
    broadcastBuckets: [],
    units,
    collectives,
    frees,
    shardedElements: ctx.ranks.map(() => perRank),
  };
}
