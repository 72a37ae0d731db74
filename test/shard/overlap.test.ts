// The overlap model: FSDP prefetch hides all-gathers when compute is long enough and exposes them when it is
// not (or when the memory budget forbids prefetching); gradient buckets launch when their last gradient is ready.
import { describe, expect, it } from "vitest";
import { clusterFor } from "../../src/cost/cluster.js";
import { groupCollectiveTime } from "../../src/cost/collectives.js";
import type { LayerSeconds } from "../../src/shard/layer-times.js";
import { simulateShardOverlap, type OverlapReport } from "../../src/shard/overlap.js";
import { accumulationPasses, fillDrainPasses, type ComputePass } from "../../src/shard/passes.js";
import type { ShardCollective, ShardPlan } from "../../src/shard/types.js";
import { layerSecondsFromCost } from "../../src/shard/layer-times.js";
import { costGraph } from "../../src/cost/graph-cost.js";
import { sample, samplePlan, sum } from "./helpers.js";

const cluster = clusterFor("h100-sxm", 8);
const seconds = (c: ShardCollective): number =>
  groupCollectiveTime(cluster, c.kind.toLowerCase() as Parameters<typeof groupCollectiveTime>[1], c.bytes, c.group);
const uniform = (t: number, layers = 6): LayerSeconds[] => Array.from({ length: layers }, () => ({ forward: t, backward: t, weightGrad: t }));

/** mlp under FSDP on 4 ranks: units [0,1], [2], [3], [4] and the root [5]. */
const fsdpPlan = (): ShardPlan => samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000 });
const run = (plan: ShardPlan, layerSeconds: LayerSeconds[], passes: ComputePass[], prefetchBudgetBytes?: number): OverlapReport =>
  simulateShardOverlap(plan, { cluster, layerSeconds, passes, ...(prefetchBudgetBytes !== undefined && { prefetchBudgetBytes }) });
const gathers = (r: OverlapReport) => r.collectives.filter((c) => c.kind === "ALL_GATHER");

describe("FSDP prefetch", () => {
  it("long compute hides every gather but the first, each issued one op ahead; the last reduce-scatter stays exposed", () => {
    const plan = fsdpPlan();
    const r = run(plan, uniform(1), accumulationPasses(1));
    const firstGather = seconds(plan.collectives.find((c) => c.kind === "ALL_GATHER" && c.unit === 0)!);
    const lastScatter = seconds(plan.collectives.find((c) => c.kind === "REDUCE_SCATTER" && c.unit === 0)!);
    expect(r.exposedComm).toBeCloseTo(firstGather + lastScatter, 12);
    expect(r.noCommStepEnd).toBe(18);
    const g = gathers(r);
    expect(g).toHaveLength(4 * 2 + 1);
    expect(g[0]!.aheadOps).toBe(0);
    for (const x of g.slice(1)) expect(x.aheadOps).toBe(1);
    // The lowering's anchor: unit 1 (layer 2) is gathered at the start of layer 1's forward.
    expect(g[1]).toMatchObject({ unit: 1, issuedBefore: { phase: "forward", layer: 1, mb: 0 } });
  });

  it("waiting for the previous stage's activation leaves time to gather the first unit too", () => {
    const plan = fsdpPlan();
    const r = run(plan, uniform(1), [{ kind: "F", mb: 0, readyAt: 0.5 }, { kind: "B", mb: 0 }]);
    const lastScatter = seconds(plan.collectives.find((c) => c.kind === "REDUCE_SCATTER" && c.unit === 0)!);
    expect(r.noCommStepEnd).toBe(18.5);
    expect(r.exposedComm).toBeCloseTo(lastScatter, 12);
  });

  it("no compute: nothing overlaps, every second of communication is exposed", () => {
    const r = run(fsdpPlan(), uniform(0), fillDrainPasses(2));
    expect(r.noCommStepEnd).toBe(0);
    expect(r.exposedComm).toBeCloseTo(r.commSeconds, 12);
    expect(r.commSeconds).toBeGreaterThan(0);
  });

  it("compute shorter than a gather: prefetch reaches further ahead and still beats gathering on demand", () => {
    const plan = fsdpPlan();
    const t = Math.min(...plan.collectives.filter((c) => c.kind === "ALL_GATHER").map(seconds)) / 3;
    const passes = fillDrainPasses(2);
    const smart = run(plan, uniform(t), passes);
    const onDemand = run(plan, uniform(t), passes, 0);
    expect(Math.max(...gathers(smart).map((g) => g.aheadOps!))).toBeGreaterThanOrEqual(2);
    for (const g of gathers(onDemand)) expect(g.aheadOps).toBe(0);
    expect(smart.exposedComm).toBeLessThan(onDemand.exposedComm);
    expect(smart.exposedComm).toBeGreaterThan(0);
    // A unit still gathered for micro-batch 0 is not gathered again ahead for micro-batch 1.
    expect(smart.peakGatheredBytes).toBeLessThanOrEqual(sum(plan.units.map((u) => u.paddedNumel * plan.bytesPerParam.param)));
  });

  it("the memory budget caps prefetch: with none, every gather is exposed", () => {
    const plan = fsdpPlan();
    const r = run(plan, uniform(1), accumulationPasses(1), 0);
    const allGathers = sum(plan.collectives.filter((c) => c.kind === "ALL_GATHER").map(seconds));
    expect(r.exposedComm).toBeGreaterThanOrEqual(allGathers);
    // Room for the root and two units is enough to hide them again at this compute time.
    const unitBytes = plan.units.map((u) => u.paddedNumel * plan.bytesPerParam.param);
    const root = unitBytes[4]!;
    const budget = root + 2 * Math.max(...unitBytes.slice(0, 4));
    const capped = run(plan, uniform(1), accumulationPasses(1), budget);
    const free = run(plan, uniform(1), accumulationPasses(1));
    expect(capped.exposedComm).toBeCloseTo(free.exposedComm, 12);
    expect(capped.peakGatheredBytes).toBeLessThanOrEqual(budget);
  });

  it("per-micro-batch gathers repeat for every micro-batch; without resharding once per step", () => {
    const passes = fillDrainPasses(3);
    expect(gathers(run(fsdpPlan(), uniform(1), passes))).toHaveLength(4 * 2 * 3 + 1);
    const keep = samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000, reshardAfterForward: false });
    const r = run(keep, uniform(1), passes);
    expect(gathers(r)).toHaveLength(5);
    expect(r.collectives.filter((c) => c.kind === "REDUCE_SCATTER")).toHaveLength(5 * 3);
    // All five units stay gathered through the step.
    expect(r.peakGatheredBytes).toBe(sum(keep.units.map((u) => u.paddedNumel * 4)));
  });

  it("refuses stage-level recompute under FSDP and points that the compute order lacks", () => {
    expect(() => run(fsdpPlan(), uniform(1), [{ kind: "F", mb: 0 }, { kind: "R", mb: 0 }, { kind: "B", mb: 0 }])).toThrow(/recompute/);
    expect(() => run(fsdpPlan(), uniform(1), [{ kind: "F", mb: 0 }])).toThrow(/no op for/);
    expect(() => run(fsdpPlan(), uniform(1, 5), accumulationPasses(1))).toThrow(/layerSeconds/);
  });
});

describe("gradient buckets", () => {
  it("DDP: each bucket is issued when its last gradient is ready, in the last micro-batch", () => {
    const plan = samplePlan("mlp", "none", 4, { bucketMB: 1 / 1024 });
    const r = run(plan, uniform(1), accumulationPasses(2));
    // F0 (6 s), B0 (12 s), F1 (6 s), then B1: weight_grad of layer L ends at 24 + 2·(6 − L).
    for (const t of r.collectives) {
      const c = plan.collectives[t.index]!;
      expect(t.issue).toBe(24 + 2 * (6 - c.at.layer));
      expect(t.mb).toBe(1);
    }
    expect(r.collectives).toHaveLength(plan.collectives.length);
    const atEnd = plan.collectives.filter((c) => c.at.layer === 0).map(seconds);
    expect(r.exposedComm).toBeCloseTo(sum(atEnd), 12);
  });

  it("ShardedDDP: reduces every micro-batch, broadcasts after the optimizer step", () => {
    const plan = samplePlan("mlp", "sddp", 4);
    const r = simulateShardOverlap(plan, { cluster, layerSeconds: uniform(1), passes: fillDrainPasses(3), optimizerSeconds: 2 });
    const reduces = plan.collectives.filter((c) => c.kind === "REDUCE").length;
    expect(r.collectives.filter((c) => c.kind === "REDUCE")).toHaveLength(3 * reduces);
    const bcasts = r.collectives.filter((c) => c.kind === "BROADCAST");
    expect(bcasts.length).toBeGreaterThan(0);
    const optimizerEnd = bcasts[0]!.issue;
    expect(optimizerEnd).toBeGreaterThanOrEqual(r.computeEnd + 2);
    expect(r.stepEnd).toBe(bcasts.at(-1)!.end);
  });

  it("split backward: reduce-scatters follow the W passes", () => {
    const plan = fsdpPlan();
    const r = run(plan, uniform(1), [{ kind: "F", mb: 0 }, { kind: "I", mb: 0 }, { kind: "W", mb: 0 }]);
    // F: 6 ops, I: 6 ops, then W runs layers 5..0: weight_grad of layer L ends at 12 + (6 − L) plus the
    // first gather's delay.
    const delay = r.collectives[0]!.end;
    for (const t of r.collectives.filter((c) => c.kind === "REDUCE_SCATTER")) {
      const layer = plan.collectives[t.index]!.at.layer;
      expect(t.issue).toBeCloseTo(delay + 12 + (6 - layer), 12);
    }
  });
});

describe("inputs from the cost model", () => {
  it("layer times: forward as costed, backward split between input and weight gradients by their FLOPs", () => {
    const { training, train } = sample("gpt2-124m");
    const options = { cluster, precision: train.precision, bindings: { B: 8, S: train.seq! } };
    const times = layerSecondsFromCost(training, { start: 2, end: 14 }, options);
    const costs = costGraph(training, options).layers.slice(2, 14);
    expect(times).toHaveLength(12);
    times.forEach((t, i) => {
      const c = costs[i]!;
      expect(t.forward).toBe(c.forwardSeconds);
      expect(t.backward + t.weightGrad).toBeCloseTo(c.backwardSeconds, 15);
      const share = c.backwardFlops.weight / (c.backwardFlops.input + c.backwardFlops.weight);
      expect(t.weightGrad).toBeCloseTo(c.backwardSeconds * share, 15);
    });
  });

  it("gpt2-124m, FSDP on 8 H100s with costed layers: most communication hides behind compute", () => {
    const { training, train } = sample("gpt2-124m");
    const plan = samplePlan("gpt2-124m", "fsdp", 8, { fsdpMinParams: 5e6 });
    const layerSeconds = layerSecondsFromCost(training, plan.layers, { cluster, precision: train.precision, bindings: { B: 8, S: train.seq! } });
    const r = simulateShardOverlap(plan, { cluster, layerSeconds, passes: accumulationPasses(4) });
    expect(r.exposedComm).toBeGreaterThan(0);
    expect(r.exposedComm).toBeLessThan(0.5 * r.commSeconds);
  });

  it("pass helpers: gradient accumulation and fill-drain orders", () => {
    const text = (ps: ComputePass[]) => ps.map((p) => `${p.kind}${p.mb}`).join(" ");
    expect(text(accumulationPasses(2))).toBe("F0 B0 F1 B1");
    expect(text(fillDrainPasses(3))).toBe("F0 F1 F2 B2 B1 B0");
    expect(() => fillDrainPasses(0)).toThrow(/positive/);
  });
});
