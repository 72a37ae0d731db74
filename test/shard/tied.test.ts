// Weights tied across pipeline stages (GPT's wte.weight = lm_head.weight): every stage reading the weight holds
// a replica, one tied ALL_REDUCE per step (per micro-batch under fsdp/sddp) sums the stages' partial gradients
// over replica r of each stage, and each holder's memory counts its replica.
import { describe, expect, it } from "vitest";
import { SHARD_STRATEGIES, type ShardStrategy } from "../../src/check/settings-types.js";
import { modelStateBytes } from "../../src/cost/memory.js";
import { formatAction } from "../../src/schedule/action.js";
import { tiedAction } from "../../src/shard/actions.js";
import { buildShardPlan } from "../../src/shard/plan.js";
import { tiedGroups } from "../../src/shard/tied-groups.js";
import type { ShardPlan } from "../../src/shard/types.js";
import { evenStages, pipelinePlans, sample, samplePlan, sum, type SampleName } from "./helpers.js";

const WTE = "wte.weight";
const N = 2;
const M = 4;

/** Occurrences per step with M micro-batches. */
const perStep = (plan: ShardPlan): number => sum(plan.tiedCollectives.map((c) => (c.at.microBatch === "each" ? M : 1)));
const psi = (plan: ShardPlan): number => sum(plan.params.map((p) => p.numel));

/** The stage's gradient collective (bucket or unit) carries the weight. */
function carries(plan: ShardPlan, index: number, name: string): boolean {
  const c = plan.collectives[index]!;
  return c.of === "unit" ? plan.units[c.unit]!.params.some((m) => m.name === name) : plan.gradBuckets[c.unit]!.params.includes(name);
}

describe("GPT's tied embedding over pipeline stages", () => {
  for (const name of ["gpt-tiny", "gpt2-124m"] as const satisfies readonly SampleName[]) {
    for (const stageCount of [2, 4]) {
      for (const strategy of SHARD_STRATEGIES) {
        it(`${name}, ${stageCount} stages × ${N} replicas, ${strategy}`, () => {
          const { training, train, model } = sample(name);
          const stages = evenStages(training.layers().length, stageCount);
          const plans = pipelinePlans(training, train, strategy, stages, N, { fsdpMinParams: name === "gpt-tiny" ? 3000 : 2e7 });
          const last = stageCount - 1;
          const numel = training.param(WTE)!.type.shape.reduce((n, d) => n * d.coef, 1);
          const gradBytes = numel * plans[0]!.bytesPerParam.grad;
          expect(plans.filter((p) => p.params.some((q) => q.name === WTE)).map((p) => p.stage)).toEqual([0, last]);
          // Every parameter is held once, the embedding twice; each holder's memory counts its replica.
          expect(sum(plans.map(psi))).toBe(model.graph.parameterCount() + numel);
          for (const plan of plans) {
            expect(plan.memory.zeroFormula).toBe(modelStateBytes(psi(plan), N, strategy, train.precision, train.optimizer, train.reduceDtype));
            expect(plan.memory.maxTotal).toBe(plan.memory.zeroFormula + plan.memory.shardedBytesPerElement * plan.memory.excessElements);
            const holder = plan.stage === 0 || plan.stage === last;
            expect(plan.crossStageParams).toEqual(holder ? [WTE] : []);
            if (!holder) {
              expect([plan.tied, plan.tiedCollectives]).toEqual([[], []]);
              continue;
            }
            const inStage = model.graph.params().filter((p) => p.layer >= plan.layers.start && p.layer < plan.layers.end);
            const declared = sum(inStage.map((p) => p.type.shape.reduce((n, d) => n * d.coef, 1)));
            expect(psi(plan)).toBe(plan.stage === 0 ? declared : declared + numel);
            const t = plan.tied.find((x) => x.name === WTE)!;
            expect(t).toMatchObject({ aliases: ["lm_head.weight"], stages: [0, last], primaryStage: 0, declaredLayer: 0, collective: 0 });
            // The stage's partial is complete at its lowest read: the embedding (layer 0) or lm_head (the last layer).
            expect(t.gradLayer).toBe(plan.stage === 0 ? 0 : training.layers().length - 1);
            expect(plan.tiedCollectives).toHaveLength(1);
            const c = plan.tiedCollectives[0]!;
            expect(c).toMatchObject({ kind: "ALL_REDUCE", of: "tiedGrad", param: WTE, bytes: gradBytes, stages: [0, last], rule: "sameReplica" });
            expect(c.unit).toBe(plan.gradBuckets.length);
            const tiedFirst = strategy === "fsdp" || strategy === "sddp";
            // Once per step where gradients accumulate whole until the step's reduction; every micro-batch where
            // each micro-batch is reduced into shards or owners.
            expect(perStep(plan)).toBe(tiedFirst ? M : 1);
            expect(c.reduction!.order).toBe(tiedFirst ? "tiedFirst" : "reductionFirst");
            expect(carries(plan, c.reduction!.collective, WTE)).toBe(true);
            const reduction = plan.collectives[c.reduction!.collective]!;
            if (tiedFirst) {
              expect(c.at).toEqual({ when: "after", phase: "weight_grad", layer: t.gradLayer, microBatch: "each" });
              // The reduction hangs on the same op or a later one (a lower layer: backward runs last to first).
              expect(reduction.at.layer).toBeLessThanOrEqual(c.at.layer);
            } else {
              expect(c.at).toEqual(reduction.at);
            }
            expect(c.at.layer).toBeGreaterThanOrEqual(plan.layers.start);
            expect(c.at.layer).toBeLessThan(plan.layers.end);
          }
          // Replica r of the first stage with replica r of the last.
          expect(tiedGroups(plans, WTE)).toEqual([
            [0, last * N],
            [1, last * N + 1],
          ]);
        });
      }
    }
  }

  it("a group of one: one tied all-reduce per step after the stage's last contribution, nothing to order it against", () => {
    const { training, train } = sample("gpt-tiny");
    for (const strategy of SHARD_STRATEGIES) {
      const plans = pipelinePlans(training, train, strategy, evenStages(6, 2), 1);
      expect(plans.map((p) => p.collectives)).toEqual([[], []]);
      const points = plans.map((p) => p.tiedCollectives.map((c) => [c.at.layer, c.at.microBatch, c.reduction]));
      expect(points).toEqual([[[0, "last", undefined]], [[5, "last", undefined]]]);
      expect(tiedGroups(plans, WTE)).toEqual([[0, 1]]);
    }
  });

  it("tied all-reduces become ALL_REDUCE actions numbered after the gradient buckets", () => {
    const { training, train } = sample("gpt-tiny");
    const none = pipelinePlans(training, train, "none", evenStages(6, 2), N)[1]!;
    expect(none.gradBuckets).toHaveLength(1);
    expect(formatAction(tiedAction(none, none.tiedCollectives[0]!))).toBe("1ALL_REDUCEu1");
    const fsdp = pipelinePlans(training, train, "fsdp", evenStages(6, 2), N)[1]!;
    expect(formatAction(tiedAction(fsdp, fsdp.tiedCollectives[0]!, 3))).toBe("1ALL_REDUCE3u0");
    expect(() => tiedAction(fsdp, fsdp.tiedCollectives[0]!)).toThrow(/needs its micro-batch/);
  });

  it("one stage holding every read: described, no collective; FSDP keeps the unit gathered until lm_head reads it", () => {
    for (const strategy of SHARD_STRATEGIES) {
      const plan = samplePlan("gpt2-124m", strategy, 4, { fsdpMinParams: 2e7 });
      expect(plan.tied).toEqual([
        {
          name: WTE,
          aliases: ["lm_head.weight"],
          numel: 50257 * 768,
          declaredLayer: 0,
          useLayers: [0, 15],
          stages: [0],
          primaryStage: 0,
          localUseLayers: [0, 15],
          gradLayer: 0,
        },
      ]);
      expect([plan.tiedCollectives, plan.crossStageParams]).toEqual([[], []]);
      if (strategy !== "fsdp") continue;
      const unit = plan.units.find((u) => u.params.some((m) => m.name === WTE))!;
      expect(unit.root).toBe(false);
      expect(unit.span).toEqual({ first: 0, last: 15 });
      const frees = plan.frees.filter((f) => f.unit === unit.index).map((f) => [f.at.phase, f.at.layer]);
      expect(frees).toEqual([
        ["forward", 15],
        ["backward", 0],
      ]);
    }
  });

  it("a model without ties has no tied weights and no tied collectives on any stage", () => {
    for (const [name, count] of [["llama-7b", 4], ["mlp", 3]] as const) {
      const { training, train } = sample(name);
      for (const strategy of ["none", "fsdp"] as ShardStrategy[]) {
        const plans = pipelinePlans(training, train, strategy, evenStages(training.layers().length, count), N);
        for (const p of plans) expect([p.tied, p.tiedCollectives, p.crossStageParams]).toEqual([[], [], []]);
      }
    }
  });

  it("rejects a pipeline that does not cut the layers in order, or that gives the stage other layers", () => {
    const { training, train } = sample("gpt-tiny");
    const base = { graph: training, strategy: "none" as const, precision: train.precision, reduceDtype: train.reduceDtype, optimizer: train.optimizer, ranks: [0] };
    const cut = (stages: { start: number; end: number }[], extra = {}) => () => buildShardPlan({ ...base, pipeline: { stages }, ...extra });
    expect(cut([{ start: 0, end: 3 }, { start: 4, end: 6 }])).toThrow(/stage 1 has layers \[4, 6\); stages must cut/);
    expect(cut([{ start: 0, end: 3 }])).toThrow(/end at layer 3, but 'gpt_tiny' has 6 layers/);
    expect(cut([{ start: 0, end: 3 }, { start: 3, end: 6 }], { stage: 1, layers: { start: 0, end: 3 } })).toThrow(/pipeline gives it \[3, 6\)/);
    expect(cut([{ start: 0, end: 3 }, { start: 3, end: 6 }], { stage: 2 })).toThrow(/pipeline gives it no layers/);
    // The stage's layers default to the pipeline's entry.
    expect(cut([{ start: 0, end: 3 }, { start: 3, end: 6 }], { stage: 1 })().layers).toEqual({ start: 3, end: 6 });
  });

  it("tiedGroups rejects missing stages, mismatched plans and stages sharing a device", () => {
    const { training, train } = sample("gpt-tiny");
    const stages = evenStages(6, 2);
    const plans = pipelinePlans(training, train, "oss", stages, N);
    expect(() => tiedGroups([plans[0]!], WTE)).toThrow(/stage 1 holds 'wte.weight'/);
    expect(() => tiedGroups(plans, "wpe.weight")).toThrow(/no stage plan/);
    const fsdp = pipelinePlans(training, train, "fsdp", stages, N);
    expect(() => tiedGroups([plans[0]!, fsdp[1]!], WTE)).toThrow(/differ in strategy/);
    const sameDevice = { ...plans[1]!, ranks: plans[0]!.ranks };
    expect(() => tiedGroups([plans[0]!, sameDevice], WTE)).toThrow(/share a device/);
  });
});
