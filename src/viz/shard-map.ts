// The shard map: for every stage's shard group, which rank holds which part of the weights, gradients and
// optimizer state (ZeRO 0-3), with the bytes each holds; with tensor parallelism, also which slice of each
// parameter every rank of a tensor-parallel group holds (tensor-map.ts).
import { shardGroupOf, type Plan, type PlanShard } from "../plan/plan.js";
import { plural, rankText } from "./format.js";
import { tensorDevices, tensorShard } from "./tensor-map.js";
import type { LayerGroup, ShardGroup, ShardMember } from "./view-types.js";

const HOLDS: Readonly<Record<string, string>> = {
  none: "every rank holds a full replica of the stage's weights, gradients and optimizer state",
  oss: "every rank holds full weights and gradients; the optimizer state of each parameter lives on its owner only (ZeRO-1)",
  sddp: "every rank holds full weights; each parameter's gradient and optimizer state live on its owner only (ZeRO-2)",
  fsdp: "group rank g holds slice g of every FSDP unit's flat weights, gradients and optimizer state (ZeRO-3)",
};

function owns(s: PlanShard, g: number, order: ReadonlyMap<string, number>, shardGroup: number): string[] {
  if (s.strategy === "fsdp") {
    // Slices are of the padded flat parameter: the last rank's may end in padding, or be padding only. Under
    // hybrid sharding group ranks g, g + shardGroup, ... hold the same slice.
    const slice = g % shardGroup;
    return s.units.map((u) => {
      const lo = slice * u.shardNumel;
      const hi = Math.min((slice + 1) * u.shardNumel, u.numel) - 1;
      return lo > hi ? `unit ${u.index}: padding only` : `unit ${u.index}: elements ${lo}..${hi} of ${u.numel}`;
    });
  }
  // In the model's declaration order, as the plan lists its parameters.
  const rank = (p: string) => order.get(p) ?? order.size;
  return Object.keys(s.owners)
    .filter((p) => s.owners[p] === g)
    .sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

export function shardGroups(plan: Plan, groups: readonly LayerGroup[]): ShardGroup[] {
  const order = new Map(plan.graph.params.map((p, i) => [p.name, i]));
  const tp = plan.settings.tensorParallel;
  // The plan's shard group is tensor rank 0's; every other tensor rank t shards its own slices alike over
  // the same replicas' rank t, holding the same bytes (the slices are equal parts). Those ranks lie tp apart,
  // so no run of them joins into a range: a long group is written by its ends.
  const over = (ranks: readonly number[]) => {
    if (tp === 1) return `ranks ${rankText(ranks)}`;
    const list = ranks.length > 3 ? `${ranks[0]}, ${ranks[1]}, ..., ${ranks[ranks.length - 1]}` : rankText(ranks);
    return `ranks ${list} (tensor rank 0; each tensor rank t likewise over these ranks + t)`;
  };
  return plan.shard.map((s, k) => {
    const shardGroup = shardGroupOf(plan, k);
    const members: ShardMember[] = s.ranks.map((rank, g) => {
      const b = s.stateBytes[g]!;
      return { rank, devices: tensorDevices([rank], tp), groupRank: g, paramBytes: b.param, gradBytes: b.grad, optimizerBytes: b.optimizer, owns: owns(s, g, order, shardGroup) };
    });
    const hybrid =
      shardGroup < s.ranks.length
        ? `; hybrid sharding: g is taken mod ${shardGroup}, each shard group of ${shardGroup} consecutive ranks holding every slice and the ${s.ranks.length / shardGroup} groups replicas of each other (their gradient shards all-reduced once per step)`
        : "";
    const units = s.strategy === "fsdp" ? ` (${plural(s.units.length, "unit")}${hybrid})` : "";
    const holds = s.ranks.length === 1 ? "a group of one: the rank holds everything" : `${HOLDS[s.strategy] ?? `sharded as '${s.strategy}'`}${units}`;
    const tensor = tensorShard(plan, s.stage, groups);
    return { stage: s.stage, strategy: s.strategy, ranks: s.ranks, over: over(s.ranks), holds, members, ...(tensor && { tensor }) };
  });
}
