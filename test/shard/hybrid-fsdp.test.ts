// Hybrid sharding (shard groups smaller than the data-parallel group) and no_sync in the FSDP shard plan:
// units split over the shard group, gathers and reduce-scatters inside it, one all-reduce of each gradient
// shard across the groups per step, reduce-scatters once per step under no_sync, and the state per rank
// as ZeRO-3 over the shard group.
import { describe, expect, it } from "vitest";
import { modelStateBytes } from "../../src/cost/memory.js";
import { formatPoint } from "../../src/shard/points.js";
import { sample, samplePlan, sum } from "./helpers.js";

describe("hybrid sharding", () => {
  const plan = samplePlan("mlp", "fsdp", 8, { fsdpMinParams: 4000, shardGroup: 4 });

  it("splits each unit over the shard group, not the whole data-parallel group", () => {
    expect(plan.groupSize).toBe(8);
    expect(plan.shardGroup).toBe(4);
    for (const u of plan.units) {
      expect(u.paddedNumel % 4).toBe(0);
      expect(u.shardNumel).toBe(u.paddedNumel / 4);
      expect(u.shards.map((s) => s.rank)).toEqual([0, 1, 2, 3]);
    }
  });

  it("gathers and reduce-scatters over group rank 0's shard group, all-reduces its shard over the replicas once per step", () => {
    for (const u of plan.units) {
      const mine = plan.collectives.filter((c) => c.unit === u.index);
      for (const c of mine.filter((x) => x.kind !== "ALL_REDUCE")) expect(c.group).toEqual([0, 1, 2, 3]);
      const ar = mine.filter((x) => x.kind === "ALL_REDUCE");
      expect(ar).toHaveLength(1);
      expect(ar[0]!.group).toEqual([0, 4]);
      expect(ar[0]!.bytes).toBe(u.shardNumel * plan.bytesPerParam.grad);
      const rs = mine.find((x) => x.kind === "REDUCE_SCATTER")!;
      // At the reduce-scatter's point, for the step's last micro-batch: it sums what the groups reduced.
      expect(formatPoint(ar[0]!.at)).toBe(formatPoint({ ...rs.at, microBatch: "last" }));
      expect(plan.collectives.indexOf(ar[0]!)).toBeGreaterThan(plan.collectives.indexOf(rs));
    }
  });

  it("holds ZeRO-3's state over the shard group: (param + grad + optimizer) bytes · Ψ / 4 plus padding", () => {
    const psi = sum(plan.params.map((p) => p.numel));
    const s = sample("mlp");
    expect(plan.memory.zeroFormula).toBe(modelStateBytes(psi, 4, "fsdp", s.train.precision, s.train.optimizer, s.train.reduceDtype));
    const perElement = plan.bytesPerParam.param + plan.bytesPerParam.grad + plan.bytesPerParam.optimizer;
    for (const r of plan.memory.perRank) expect(r.total).toBe(perElement * sum(plan.units.map((u) => u.shardNumel)));
    // Twice the plain FSDP plan's shard (up to padding).
    const plain = samplePlan("mlp", "fsdp", 8, { fsdpMinParams: 4000 });
    expect(plan.memory.perRank[0]!.total).toBeGreaterThan(1.9 * plain.memory.perRank[0]!.total);
  });

  it("a shard group that does not divide the group is refused", () => {
    expect(() => samplePlan("mlp", "fsdp", 8, { shardGroup: 3 })).toThrow(/does not divide/);
  });

  it("is plain FSDP when the shard group is the whole group", () => {
    const whole = samplePlan("mlp", "fsdp", 8, { fsdpMinParams: 4000, shardGroup: 8 });
    expect(whole.collectives.filter((c) => c.kind === "ALL_REDUCE")).toHaveLength(0);
    expect(whole).toEqual(samplePlan("mlp", "fsdp", 8, { fsdpMinParams: 4000 }));
  });
});

describe("no_sync", () => {
  it("reduce-scatters each unit once, after the last micro-batch; gathers as before", () => {
    const each = samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000 });
    const once = samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000, noSync: true });
    expect(once.noSync).toBe(true);
    const rs = (p: typeof each) => p.collectives.filter((c) => c.kind === "REDUCE_SCATTER");
    expect(rs(once).map((c) => c.at.microBatch)).toEqual(rs(each).map(() => "last"));
    expect(rs(each).every((c) => c.at.microBatch === "each")).toBe(true);
    expect(once.collectives.filter((c) => c.kind === "ALL_GATHER")).toEqual(each.collectives.filter((c) => c.kind === "ALL_GATHER"));
  });

  it("is ignored by the other strategies", () => {
    for (const strategy of ["none", "oss", "sddp"] as const) {
      expect(samplePlan("mlp", strategy, 4, { noSync: true, shardGroup: 2 })).toEqual(samplePlan("mlp", strategy, 4));
    }
  });
});
