// The tensor-parallel pass: the graph one rank runs (local shapes, Megatron's collectives), and — run in
// lockstep on the interpreter over every rank of the group, each on its slices of the whole model's
// parameters — the same loss and, sliced, the same gradients as the whole model on one device, then the
// same training (Adam, clipping) step after step.
import { describe, expect, it } from "vitest";
import type { CheckedModel } from "../../src/check/check.js";
import type { TrainConfig } from "../../src/check/settings-types.js";
import { syntheticData } from "../../src/data/synthetic.js";
import type { Graph } from "../../src/graph/graph.js";
import { joinRanks, sliceForRank } from "../../src/graph/param-split.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { initParams } from "../../src/interp/init.js";
import { Rng } from "../../src/interp/random.js";
import { TrainingSession } from "../../src/interp/session.js";
import { TensorParallelGroup } from "../../src/interp/tensor-parallel.js";
import type { FloatTensor, Tensor } from "../../src/interp/tensor.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { splitForTensorParallel } from "../../src/passes/tensor-parallel.js";
import { tensorParallelProblems } from "../../src/graph/tensor-parallel-problems.js";
import { checkLlamaTiny } from "../support/llama-tiny.js";
import { checkSample } from "./helpers.js";

const LLAMA_TRAIN = `
train {
  batch = 4, seq = 16
  optimizer = adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-8)
  clip_grad_norm = 1.0
  precision = fp32
  seed = 1
  steps = 10
  data = synthetic()
}
`;

function model(name: string): CheckedModel {
  if (name !== "llama-tiny") return checkSample(name);
  const r = checkLlamaTiny(LLAMA_TRAIN);
  if (!r.model) throw new Error(r.diagnostics.map((d) => d.message).join("; "));
  return r.model;
}

const split = (g: Graph, degree: number, sequenceParallel = false): Graph => splitForTensorParallel(g, { degree, sequenceParallel });
const opCount = (g: Graph, op: string, phase = "forward"): number => g.ops().filter((o) => o.op === op && o.phase === phase).length;

/** Each rank's parameters: its slices of the whole model's (by the split graph's ParamSplit records). */
function rankParams(rankGraph: Graph, whole: ReadonlyMap<string, Tensor>, degree: number): Map<string, Tensor>[] {
  return Array.from({ length: degree }, (_, k) => {
    const out = new Map<string, Tensor>();
    for (const p of rankGraph.params()) {
      const w = whole.get(p.name)!;
      out.set(p.name, p.split ? { shape: p.type.shape.map((d) => d.coef), data: sliceForRank(w.data, w.shape, p.split, k) } : w);
    }
    return out;
  });
}

/** N(0, 0.3²) added to the initial weights: every gradient far from zero, every nonlinearity exercised. */
function perturbed(g: Graph, seed: number): Map<string, FloatTensor> {
  const r = new Rng(seed);
  const params = initParams(g, 1, "f64");
  for (const t of params.values()) for (let i = 0; i < t.data.length; i++) t.data[i] = t.data[i]! + 0.3 * r.normal();
  return params;
}

/** Every element within atol + rtol·|expected| (numpy's allclose), else the worst one named. */
function closeTo(actual: ArrayLike<number>, expected: ArrayLike<number>, rtol: number, atol: number, what: string): void {
  expect(actual.length, what).toBe(expected.length);
  let worst = -1;
  let excess = 0;
  for (let i = 0; i < expected.length; i++) {
    const over = Math.abs(actual[i]! - expected[i]!) / (atol + rtol * Math.abs(expected[i]!));
    if (over > excess) [worst, excess] = [i, over];
  }
  if (excess > 1) expect.fail(`${what}[${worst}]: ${actual[worst]} vs ${expected[worst]} (${excess.toFixed(1)}× the tolerance)`);
}

describe("the graph one tensor-parallel rank runs", () => {
  it("gpt-tiny over 2 ranks: Megatron's splits and one all-reduce per attention, per MLP and for the embedding", () => {
    const whole = checkSample("gpt-tiny").graph;
    const g = split(whole, 2);
    expect(verifyGraph(g)).toEqual([]);
    const shape = (name: string): number[] => g.param(name)!.type.shape.map((d) => d.coef);
    expect(shape("wte.weight")).toEqual([32, 32]); // vocabulary-parallel: 64 rows / 2
    expect(g.param("wte.weight")!.split).toEqual({ axis: 0, parts: 2, blocks: [64] });
    expect(g.param("lm_head.weight")!.name).toBe("wte.weight"); // still tied, to the same rows
    expect(shape("wpe.weight")).toEqual([16, 32]); // position table: whole
    expect(shape("layers.0.attn.qkv.weight")).toEqual([48, 32]); // 2 of 4 heads: (2 + 2·2)·8 rows
    expect(g.param("layers.0.attn.qkv.weight")!.split).toEqual({ axis: 0, parts: 2, blocks: [32, 32, 32] });
    expect(shape("layers.0.attn.proj.weight")).toEqual([32, 16]);
    expect(shape("layers.0.attn.proj.bias")).toEqual([32]); // added once, after the all-reduce
    expect(shape("layers.0.mlp.fc.weight")).toEqual([64, 32]);
    expect(shape("layers.0.mlp.fc.bias")).toEqual([64]);
    expect(shape("layers.0.mlp.proj.weight")).toEqual([32, 64]);
    expect(g.param("layers.0.mlp.proj.weight")!.split).toEqual({ axis: 1, parts: 2, blocks: [128] });
    expect(g.param("layers.0.ln_1.weight")!.split).toBeUndefined();
    // Forward collectives: embedding 1 + (attention 1 + MLP 1) × 2 layers; no gathered activations.
    expect(opCount(g, "tp_all_reduce")).toBe(5);
    expect(opCount(g, "tp_copy")).toBe(2 * 2 + 1); // into each attention, each fc, and the head
    expect(opCount(g, "tp_all_gather")).toBe(0);
    expect(g.ops().find((o) => o.op === "cross_entropy")!.attrs["parts"]).toBe(2);
    // A rank holds half the weights of every split matrix: fewer parameters than the whole model.
    expect(g.parameterCount()).toBeLessThan(0.6 * whole.parameterCount());
  });

  it("degree 1 returns the graph itself", () => {
    const g = checkSample("gpt-tiny").graph;
    expect(split(g, 1)).toBe(g);
    expect(split(g, 1, true)).toBe(g);
  });

  it("gpt-tiny over 2 ranks with sequence parallelism: the residual stream and norms on half the sequence, reduce-scatters and all-gathers instead of all-reduces", () => {
    const g = split(checkSample("gpt-tiny").graph, 2, true);
    expect(verifyGraph(g)).toEqual([]);
    const shapeOf = (t: number): string => g.tensor(t).type.shape.map((d) => `${d.coef}${Object.keys(d.syms).join("")}`).join("×");
    // S is a rank's part of the sequence: the model reads the whole of it, 2·S.
    expect(shapeOf(g.inputs()[0]!)).toBe("1B×2S");
    // Forward: the embedding and each attention and MLP leave their region by a reduce-scatter (1 + 2 × 2),
    // each attention, MLP and the head enter it by an all-gather whose backward reduce-scatters (2 × 2 + 1).
    expect(opCount(g, "tp_reduce_scatter")).toBe(5);
    expect(opCount(g, "tp_seq_gather")).toBe(5);
    expect(opCount(g, "tp_all_reduce")).toBe(0);
    const norm = g.ops().find((o) => o.op === "layer_norm")!;
    expect(shapeOf(norm.inputs[0]!)).toBe("1B×1S×32");
    // The norms' weights are read through tp_copy: their gradients, one part of the sequence each, summed.
    expect(g.tensor(norm.inputs[1]!).kind).not.toBe("param");
    expect(g.op(g.tensor(norm.inputs[1]!).producer!).op).toBe("tp_copy");
    // The position table is whole on every rank and sliced to the rank's positions.
    expect(opCount(g, "tp_slice")).toBe(1);
  });

  it("heads, key/value heads and vocabularies that do not divide are problems the checker reports", () => {
    const gpt = checkSample("gpt-tiny").graph;
    expect(tensorParallelProblems(gpt, 2)).toEqual([]);
    expect(tensorParallelProblems(gpt, 8).map((p) => p.message)).toEqual([
      "attention's 4 heads do not split over tensor_parallel = 8 ranks",
      "attention's 4 heads do not split over tensor_parallel = 8 ranks",
    ]);
    const llama = model("llama-tiny").graph;
    expect(tensorParallelProblems(llama, 4)[0]!.message).toBe("attention's 2 key/value heads (kv_heads) do not split over tensor_parallel = 4 ranks");
    expect(tensorParallelProblems(gpt, 3)[0]!.message).toMatch(/vocabulary \(64 rows\) does not split over tensor_parallel = 3/);
    expect(() => split(gpt, 8)).toThrow(/internal: .*heads do not split/);
  });
});

const PLAIN_SGD: TrainConfig = {
  batch: 2,
  steps: 1,
  seed: 1,
  optimizer: { kind: "sgd", lr: 0.1, momentum: 0, weightDecay: 0, nesterov: false },
  precision: "fp32",
  reduceDtype: "fp32",
  lossScale: "dynamic",
  data: { kind: "synthetic" },
};

describe("a tensor-parallel group equals the whole model on one device", () => {
  const cases: [string, number, boolean][] = [
    ["gpt-tiny", 2, false],
    ["gpt-tiny", 4, false],
    ["llama-tiny", 2, false],
    ["mlp", 2, false],
    ["mlp", 4, false],
    ["gpt-tiny", 2, true],
    ["gpt-tiny", 4, true],
    ["llama-tiny", 2, true],
    ["mlp", 2, true],
  ];
  it.each(cases)("%s over %i ranks (sequence parallel: %s): the loss and every gradient (float64, rtol 1e-10)", (name, degree, sp) => {
    const m = model(name);
    const whole = buildTrainingGraph(m.graph, PLAIN_SGD);
    const rank = buildTrainingGraph(split(m.graph, degree, sp), PLAIN_SGD);
    expect(verifyGraph(rank)).toEqual([]);
    const params = perturbed(whole, 5);
    const batch = syntheticData(whole, { seed: 3, batch: 2, ...(m.train?.seq !== undefined && { seq: m.train.seq }), float: "f64" }).batch(0);
    const reference = new TrainingSession(whole, { float: "f64", params }).gradients(batch);
    const group = new TensorParallelGroup(rankParams(rank, params, degree).map((p) => new TrainingSession(rank, { float: "f64", params: p })));
    const ranks = group.gradients(batch);
    let splitParams = 0;
    ranks.forEach((r, k) => {
      expect(r.loss).toBeCloseTo(reference.loss, 10);
      for (const p of rank.params()) {
        const full = reference.grads.get(p.name)!;
        const mine = r.grads.get(p.name)!;
        if (p.split) splitParams++;
        closeTo(mine.data, p.split ? sliceForRank(full.data, full.shape, p.split, k) : full.data, 1e-10, 1e-13, `rank ${k} ${p.name}`);
      }
    });
    expect(splitParams).toBeGreaterThan(0);
  });

  it.each([["gpt-tiny", 2, false], ["llama-tiny", 2, false], ["gpt-tiny", 4, false], ["gpt-tiny", 2, true], ["llama-tiny", 2, true]] as [string, number, boolean][])("%s over %i ranks (sequence parallel: %s): 10 steps of its Adam with clipping (fp32, rtol 1e-5)", (name, degree, sp) => {
    const m = model(name);
    const train = { ...m.train!, clipGradNorm: m.train!.clipGradNorm ?? 1.0 };
    const whole = buildTrainingGraph(m.graph, train);
    const rank = buildTrainingGraph(split(m.graph, degree, sp), train);
    expect(opCount(rank, "tp_all_reduce", "optimizer")).toBe(1); // the clipping norm's split part
    const params = initParams(whole, train.seed, "f32");
    const reference = new TrainingSession(whole, { params });
    const group = new TensorParallelGroup(rankParams(rank, params, degree).map((p) => new TrainingSession(rank, { params: p })));
    const data = syntheticData(whole, { seed: train.seed, batch: train.batch, ...(train.seq !== undefined && { seq: train.seq }) });
    for (let step = 0; step < 10; step++) {
      const want = reference.step(data.batch(step));
      for (const got of group.step(data.batch(step))) {
        expect(Math.abs(got.loss - want.loss) / want.loss, `step ${step} loss`).toBeLessThan(1e-5);
        expect(Math.abs(got.gradNorm! - want.gradNorm!) / want.gradNorm!, `step ${step} gradient norm`).toBeLessThan(1e-5);
      }
    }
    // After 10 updates the ranks' slices, joined, are the whole model's parameters. atol 1e-5 (the updates
    // move weights by up to 10 × lr = 3e-2): the key bias's gradient is zero but for rounding (softmax does
    // not change when every score of a row moves by q·b_k), and Adam turns rounding into steps of ~1e-6.
    for (const p of rank.params()) {
      const full = reference.params.get(p.name)!;
      const slices = group.ranks.map((s) => s.params.get(p.name)!.data);
      closeTo(p.split ? joinRanks(slices, full.shape, p.split) : slices[1]!, full.data, 1e-4, 1e-5, p.name);
    }
  });
});
