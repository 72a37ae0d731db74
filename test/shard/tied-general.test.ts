// Tied weights beyond GPT's embedding: a weight read on three stages gets a three-stage group; a stage reading
// it twice sums both reads before the all-reduce; a weight read only off its declaring stage moves there; and
// the stages' partial gradients (from the training graph, run by the interpreter) add up to the whole one.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import type { TensorId } from "../../src/graph/graph.js";
import { initParams } from "../../src/interp/init.js";
import { bindDims, runOps } from "../../src/interp/run.js";
import { floats, type Tensor } from "../../src/interp/tensor.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { paramUses } from "../../src/shard/sharing.js";
import { tiedGroups } from "../../src/shard/tied-groups.js";
import { evenStages, pipelinePlans, sample } from "./helpers.js";

const TRAIN = `train {
  batch = 4
  optimizer = sgd(lr: 0.1)
  precision = fp32
  steps = 1
  data = synthetic()
}
`;

/** A model from source text: layers a, mid, b, c in that order; b and c reuse a's weight. */
function build(forward: string) {
  const src = `model tied3 {
  const d = 8
  a = linear(d, d, bias: false)
  mid = linear(d, d)
  b = linear(d, d, bias: false, tie: a.weight)
  c = linear(d, d, bias: false, tie: a.weight)
  forward(x: f32[B, d], y: f32[B, d]) {
    return mse_loss(${forward}, y)
  }
}
${TRAIN}`;
  const path = "/virtual/tied3.fsm";
  const r = checkFile(path, { host: { readFile: (p) => (p === path ? src : undefined) } });
  if (!r.model?.train) throw new Error(r.diagnostics.map((d) => d.message).join("; "));
  return { training: buildTrainingGraph(r.model.graph, r.model.train), train: r.model.train };
}

describe("tied weights in general", () => {
  it("a weight read on three stages: each holds a replica, a three-stage group, replica r of each", () => {
    const { training, train } = build("c(b(mid(a(x))))");
    const stages = [{ start: 0, end: 2 }, { start: 2, end: 3 }, { start: 3, end: 4 }];
    for (const strategy of ["none", "oss", "sddp", "fsdp"] as const) {
      const plans = pipelinePlans(training, train, strategy, stages, 3);
      for (const p of plans) {
        expect(p.params.some((q) => q.name === "a.weight")).toBe(true);
        expect(p.tied).toMatchObject([{ name: "a.weight", aliases: ["b.weight", "c.weight"], stages: [0, 1, 2], useLayers: [0, 2, 3] }]);
        expect(p.tiedCollectives).toMatchObject([{ kind: "ALL_REDUCE", of: "tiedGrad", stages: [0, 1, 2], bytes: 64 * 4 }]);
      }
      expect(plans.map((p) => p.tied[0]!.gradLayer)).toEqual([0, 2, 3]);
      expect(tiedGroups(plans, "a.weight")).toEqual([
        [0, 3, 6],
        [1, 4, 7],
        [2, 5, 8],
      ]);
    }
  });

  it("a stage reading the weight twice adds both reads into its partial; a stage without reads holds nothing", () => {
    const { training, train } = build("c(b(mid(a(x))))");
    const plans = pipelinePlans(training, train, "fsdp", [{ start: 0, end: 1 }, { start: 1, end: 2 }, { start: 2, end: 4 }], 2);
    expect(plans[1]!.params.map((p) => p.name)).toEqual(["mid.weight", "mid.bias"]);
    expect(plans[1]!.tiedCollectives).toEqual([]);
    const last = plans[2]!;
    expect(last.tied).toMatchObject([{ stages: [0, 2], localUseLayers: [2, 3], gradLayer: 2 }]);
    // The replica's FSDP unit stays gathered across both reads.
    expect(last.units.map((u) => u.span)).toEqual([{ first: 2, last: 3 }]);
    expect(last.tiedCollectives[0]!.at).toMatchObject({ layer: 2, microBatch: "each" });
  });

  it("a weight read only on another stage than its declaring one moves there: one stage, no collective", () => {
    // mlp's head.weight, filed under layer 0 but read by the head (layer 5) alone. The front end never builds
    // this (an unread member is rejected), so the test patches the graph.
    const { training: mlp, train } = sample("mlp");
    const training = mlp.clone();
    training.unsafePatchParam("head.weight", { layer: 0 });
    const plans = pipelinePlans(training, train, "oss", evenStages(6, 2), 2);
    expect(plans[0]!.params.map((p) => p.name)).not.toContain("head.weight");
    expect(plans[1]!.params.find((p) => p.name === "head.weight")).toMatchObject({ layer: 5, gradLayer: 5 });
    expect(plans[1]!.tied).toMatchObject([{ name: "head.weight", declaredLayer: 0, useLayers: [5], stages: [1], primaryStage: 1 }]);
    expect(plans.map((p) => [p.tiedCollectives, p.crossStageParams])).toEqual([
      [[], []],
      [[], []],
    ]);
  });

  it("the stages' partial gradients of GPT's embedding add up to the single-device gradient", () => {
    const { training } = sample("gpt-tiny");
    const params = initParams(training, 3, "f64");
    const values = new Map<TensorId, Tensor>();
    for (const p of training.params()) values.set(p.tensor, params.get(p.name)!);
    const tokens = { shape: [2, 4], data: Int32Array.from([1, 7, 3, 60, 9, 2, 33, 5]) };
    const batch: Record<string, Tensor> = { tokens, targets: { shape: [2, 4], data: Int32Array.from([7, 3, 60, 9, 2, 33, 5, 1]) } };
    for (const t of training.inputs()) values.set(t, batch[training.tensor(t).name]!);
    runOps(training, training.ops().filter((o) => o.phase !== "optimizer"), values, { bindings: bindDims(training, batch), float: "f64" });

    const use = paramUses(training).find((u) => u.name === "wte.weight")!;
    const chain = new Set(use.gradOps.flatMap((o) => training.op(o).outputs));
    // Contributions: gradient ops fed by no other gradient op of the weight (the adds combine them).
    const contributions = use.gradOps.filter((o) => !training.op(o).inputs.some((t) => chain.has(t)));
    expect(contributions.map((o) => training.op(o).layer).sort()).toEqual([0, 5]);
    for (const stages of [evenStages(6, 2), evenStages(6, 4)]) {
      const stageOf = (l: number) => stages.findIndex((r) => l >= r.start && l < r.end);
      const partials = new Map<number, Float64Array>();
      for (const o of contributions) {
        const s = stageOf(training.op(o).layer);
        const v = floats(values.get(training.op(o).outputs[0]!)!);
        const acc = partials.get(s) ?? new Float64Array(v.length);
        v.forEach((x, i) => (acc[i]! += x));
        partials.set(s, acc);
      }
      expect([...partials.keys()].sort()).toEqual([0, stages.length - 1]);
      const whole = floats(values.get(training.paramGrad("wte.weight")!)!);
      const summed = new Float64Array(whole.length);
      for (const p of partials.values()) p.forEach((x, i) => (summed[i]! += x));
      whole.forEach((x, i) => expect(summed[i]).toBeCloseTo(x, 14));
      expect(whole.some((x) => x !== 0)).toBe(true);
    }
  });
});
