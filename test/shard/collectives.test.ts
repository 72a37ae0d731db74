// Collectives of one training step, by hand on mlp (fp32 SGD with momentum: 4-byte weights, gradients and
// momentum; 19,272 parameters = 77,088 gradient bytes), their action text, stage slices and group ranks.
import { describe, expect, it } from "vitest";
import { formatAction } from "../../src/schedule/action.js";
import { collectiveAction, freeAction } from "../../src/shard/actions.js";
import { buildShardPlan, groupRanks } from "../../src/shard/plan.js";
import { shardSpecFromSettings } from "../../src/shard/settings.js";
import type { ShardCollective, ShardPlan } from "../../src/shard/types.js";
import { sample, samplePlan, sum } from "./helpers.js";

const GRAD_BYTES = 19_272 * 4;

/** Occurrences per step with m micro-batches: a per-micro-batch collective happens m times. */
const perStep = (cs: readonly ShardCollective[], m: number): number => sum(cs.map((c) => (c.at.microBatch === "each" ? m : 1)));
const bytesPerStep = (cs: readonly ShardCollective[], m: number): number => sum(cs.map((c) => c.bytes * (c.at.microBatch === "each" ? m : 1)));
const ofKind = (plan: ShardPlan, kind: string) => plan.collectives.filter((c) => c.kind === kind);

describe("collectives per step (mlp by hand)", () => {
  for (const n of [2, 4]) {
    it(`none, ${n} replicas: one 25 MB bucket, all-reduced once after the last micro-batch`, () => {
      const plan = samplePlan("mlp", "none", n);
      expect(plan.collectives).toEqual([
        {
          kind: "ALL_REDUCE",
          of: "gradBucket",
          unit: 0,
          bytes: GRAD_BYTES,
          group: groupRanks(n),
          at: { when: "after", phase: "weight_grad", layer: 0, microBatch: "last" },
        },
      ]);
      // With 1 KiB buckets: more collectives, same total bytes (= gradient bytes).
      const small = samplePlan("mlp", "none", n, { bucketMB: 1 / 1024 });
      expect(small.collectives.length).toBe(small.gradBuckets.length);
      expect(sum(ofKind(small, "ALL_REDUCE").map((c) => c.bytes))).toBe(GRAD_BYTES);
      expect(perStep(small.collectives, 8)).toBe(small.gradBuckets.length);
    });

    it(`oss, ${n} replicas: all-reduce of every gradient, then each owner broadcasts its weights`, () => {
      const plan = samplePlan("mlp", "oss", n);
      expect(sum(ofKind(plan, "ALL_REDUCE").map((c) => c.bytes))).toBe(GRAD_BYTES);
      const bcasts = ofKind(plan, "BROADCAST");
      expect(sum(bcasts.map((c) => c.bytes))).toBe(19_272 * 4);
      for (const c of bcasts) {
        const bucket = plan.broadcastBuckets[c.unit]!;
        expect(c.root).toBe(bucket.owner);
        expect(c.at.phase).toBe("optimizer");
        for (const p of bucket.params) expect(plan.params.find((q) => q.name === p)!.optimizer).toEqual({ kind: "owner", rank: bucket.owner });
      }
      // One broadcast per owner that owns anything (everything fits one 25 MB bucket).
      expect(bcasts).toHaveLength(plan.partition!.chosen.loads.filter((l) => l > 0).length);
    });

    it(`sddp, ${n} replicas: each owner bucket reduced to its owner every micro-batch; then broadcasts`, () => {
      const plan = samplePlan("mlp", "sddp", n);
      const reduces = ofKind(plan, "REDUCE");
      expect(bytesPerStep(reduces, 1)).toBe(GRAD_BYTES);
      expect(bytesPerStep(reduces, 4)).toBe(4 * GRAD_BYTES);
      for (const c of reduces) {
        expect(c.at).toMatchObject({ when: "after", phase: "weight_grad", microBatch: "each" });
        expect(c.root).toBe(plan.gradBuckets[c.unit]!.owner);
      }
      expect(sum(ofKind(plan, "BROADCAST").map((c) => c.bytes))).toBe(19_272 * 4);
    });

    it(`fsdp, ${n} replicas, units of ≥ 4000: gathers and reduce-scatters move the padded flat size`, () => {
      const plan = samplePlan("mlp", "fsdp", n, { fsdpMinParams: 4000 });
      // Units 6272, 4160, 4160, 4160 and the root 520: all divisible by 2 and 4, so no padding.
      expect(plan.units.map((u) => u.paddedNumel)).toEqual([6272, 4160, 4160, 4160, 520]);
      const m = 3;
      const gathers = ofKind(plan, "ALL_GATHER");
      const scatters = ofKind(plan, "REDUCE_SCATTER");
      // 4 inner units gather twice per micro-batch, the root once per step.
      expect(perStep(gathers, m)).toBe(4 * 2 * m + 1);
      expect(perStep(scatters, m)).toBe(5 * m);
      expect(bytesPerStep(scatters, 1)).toBe(GRAD_BYTES);
      expect(bytesPerStep(gathers, 1)).toBe(4 * (2 * (6272 + 3 * 4160) + 520));
    });
  }

  it("fsdp with 3 replicas: the reduce-scatter bytes are the padded flat sizes", () => {
    const plan = samplePlan("mlp", "fsdp", 3, { fsdpMinParams: 4000 });
    expect(plan.units.map((u) => [u.paddedNumel, u.padding])).toEqual([[6273, 1], [4161, 1], [4161, 1], [4161, 1], [522, 2]]);
    expect(bytesPerStep(ofKind(plan, "REDUCE_SCATTER"), 1)).toBe(4 * (6273 + 3 * 4161 + 522));
  });

  it("oss on mlp with 4 replicas: largest shard 6144 elements (optimal), FairScale's greedy 6208", () => {
    const p = samplePlan("mlp", "oss", 4).partition!;
    expect([p.chosen.largest, p.chosen.optimal, p.greedy.largest]).toEqual([6144, true, 6208]);
    expect([p.largestShardBytes, p.greedyLargestShardBytes]).toEqual([6144 * 4, 6208 * 4]);
  });

  it("a group of one talks to nobody", () => {
    for (const s of ["none", "oss", "sddp", "fsdp"] as const) {
      const plan = samplePlan("mlp", s, 1);
      expect([plan.collectives, plan.frees]).toEqual([[], []]);
    }
  });
});

describe("actions and groups", () => {
  it("collectives become shard actions with the stage, micro-batch, unit and root rank", () => {
    const { training, train } = sample("mlp");
    const plan = buildShardPlan({
      graph: training,
      strategy: "sddp",
      precision: train.precision,
      reduceDtype: train.reduceDtype,
      optimizer: train.optimizer,
      ranks: groupRanks(2, 5, 3),
      stage: 1,
    });
    expect(plan.ranks).toEqual([5, 8]);
    const reduce = plan.collectives.find((c) => c.kind === "REDUCE")!;
    expect([5, 8]).toContain(reduce.root);
    expect(formatAction(collectiveAction(plan, reduce, 2))).toBe(`1REDUCE2u${reduce.unit}@${reduce.root}`);
    expect(() => collectiveAction(plan, reduce)).toThrow(/needs its micro-batch/);
    const bcast = plan.collectives.find((c) => c.kind === "BROADCAST")!;
    expect(formatAction(collectiveAction(plan, bcast))).toBe(`1BROADCASTu${bcast.unit}@${bcast.root}`);

    const fsdp = samplePlan("mlp", "fsdp", 2, { fsdpMinParams: 4000 });
    expect(formatAction(collectiveAction(fsdp, fsdp.collectives[0]!, 3))).toBe("0ALL_GATHER3u0");
    expect(formatAction(freeAction(fsdp, fsdp.frees[0]!, 3))).toBe("0FREE3u0");
  });

  it("stage plans split the parameters; a weight tied across the boundary is held by both and reported", () => {
    const { training, train, model } = sample("gpt-tiny");
    const base = { graph: training, strategy: "fsdp" as const, precision: train.precision, reduceDtype: train.reduceDtype, optimizer: train.optimizer, ranks: groupRanks(2) };
    const pipeline = { stages: [{ start: 0, end: 3 }, { start: 3, end: 6 }] };
    const spec = (start: number, end: number, stage: number) =>
      buildShardPlan({ ...base, layers: { start, end }, stage, pipeline, fsdpMinParams: 3000 });
    const a = spec(0, 3, 0);
    const b = spec(3, 6, 1);
    // Every parameter once, plus the last stage's replica of the tied embedding (read there by lm_head),
    // in declaration order.
    const declared = (lo: number, hi: number) => model.graph.params().filter((p) => p.layer >= lo && p.layer < hi).map((p) => p.name);
    expect(a.params.map((p) => p.name)).toEqual(declared(0, 3));
    expect(b.params.map((p) => p.name)).toEqual(["wte.weight", ...declared(3, 6)]);
    expect(b.params.find((p) => p.name === "wte.weight")).toMatchObject({ layer: 5, gradLayer: 5 });
    expect(a.crossStageParams).toEqual(["wte.weight"]);
    expect(b.crossStageParams).toEqual(["wte.weight"]);
    expect(samplePlan("gpt-tiny", "none", 2).crossStageParams).toEqual([]);
    for (const c of b.collectives) expect(c.at.layer).toBeGreaterThanOrEqual(3);
    // Without the other stages' layers the plan cannot name the tied group.
    const alone = () => buildShardPlan({ ...base, layers: { start: 3, end: 6 }, stage: 1 });
    expect(alone).toThrow(/share 'wte.weight' with layers? 0 .*ShardSpec.pipeline/);
  });

  it("settings: the parallel section's strategy and knobs; auto must be resolved first", () => {
    const { training, train, model } = sample("gpt2-124m");
    const spec = shardSpecFromSettings(training, train, model.parallel, { ranks: groupRanks(4) });
    expect(spec).toMatchObject({ strategy: "fsdp", bucketMB: 25, fsdpMinParams: 1e8, reshardAfterForward: true });
    const tiny = sample("gpt-tiny");
    expect(() => shardSpecFromSettings(tiny.training, tiny.train, tiny.model.parallel, { ranks: [0] })).toThrow(/shard = auto/);
    expect(shardSpecFromSettings(tiny.training, tiny.train, tiny.model.parallel, { ranks: [0], shard: "oss" }).strategy).toBe("oss");
  });

  it("rejects bad groups, ranges and forward graphs", () => {
    const { training, train, model } = sample("mlp");
    const base = { graph: training, strategy: "none" as const, precision: train.precision, reduceDtype: train.reduceDtype, optimizer: train.optimizer };
    expect(() => buildShardPlan({ ...base, ranks: [] })).toThrow(/at least one rank/);
    expect(() => buildShardPlan({ ...base, ranks: [1, 1] })).toThrow(/repeat/);
    expect(() => buildShardPlan({ ...base, ranks: [0], layers: { start: 2, end: 2 } })).toThrow(/non-empty range/);
    expect(() => buildShardPlan({ ...base, graph: model.graph, ranks: [0] })).toThrow(/training graph/);
  });
});
