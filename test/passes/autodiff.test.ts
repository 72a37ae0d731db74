// The autodiff pass's training graphs: structure (phases, links, gradient accumulation, input and weight
// gradients apart, optimizer state and updates), verification on every sample, purity and the pipeline.
import { describe, expect, it } from "vitest";
import type { Graph, OpNode } from "../../src/graph/graph.js";
import { printGraph } from "../../src/graph/print.js";
import { getOp, languageOps, opNames } from "../../src/graph/registry.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { autodiff, buildTrainingGraph, savedByLayer, savedForBackward, savedTensors } from "../../src/passes/autodiff.js";
import { PIPELINE, runPipeline } from "../../src/passes/pipeline.js";
import { checkSources, codes, model } from "../check/helpers.js";
import { checkSample, trainSample } from "./helpers.js";

const gradientOps = (g: Graph): OpNode[] => g.ops().filter((o) => o.phase === "backward" || o.phase === "weight_grad");
const producer = (g: Graph, t: number): OpNode => g.op(g.tensor(t).producer!);

describe("training graphs of every sample verify", () => {
  for (const name of ["mlp", "gpt-tiny", "gpt2-124m", "llama-7b", "gpt3-175b"]) {
    it(name, () => {
      const model = checkSample(name);
      const t0 = performance.now();
      const training = buildTrainingGraph(model.graph, model.train!);
      const ms = performance.now() - t0;
      const t1 = performance.now();
      expect(verifyGraph(training)).toEqual([]);
      const counts = Object.fromEntries(["forward", "backward", "weight_grad", "optimizer"].map((p) => [p, training.ops().filter((o) => o.phase === p).length]));
      // Logged, not asserted: structure only, no tensors, so even GPT-3 175B builds in well under a second here.
      console.log(`${name}: training graph built in ${ms.toFixed(0)} ms, verified in ${(performance.now() - t1).toFixed(0)} ms; ops ${JSON.stringify(counts)}`);
      expect(training.paramGrads().size).toBe(training.params().length);
    });
  }
});

describe("structure", () => {
  const { forward, training } = trainSample("gpt-tiny");

  it("leaves the forward graph untouched and keeps it as the first phase", () => {
    const before = printGraph(checkSample("gpt-tiny").graph);
    expect(printGraph(forward)).toBe(before);
    expect(forward.isTraining()).toBe(false);
    expect(training.isTraining()).toBe(true);
    expect(printGraph(training).startsWith(before)).toBe(true);
    const firstOther = training.ops().findIndex((o) => o.phase !== "forward");
    expect(firstOther).toBe(forward.ops().length);
  });

  it("seeds the backward with fill {value: 1} linked to the loss op", () => {
    const seed = training.ops()[forward.ops().length]!;
    expect(seed.op).toBe("fill");
    expect(seed.attrs).toMatchObject({ value: 1 });
    expect(seed.phase).toBe("backward");
    expect(seed.forwardOp).toBe(training.tensor(training.loss!).producer);
  });

  it("links every backward and weight_grad op to the forward op it differentiates", () => {
    for (const o of gradientOps(training)) {
      expect(o.forwardOp, `${o.op} (op ${o.id})`).toBeDefined();
      const f = training.op(o.forwardOp!);
      expect(f.phase).toBe("forward");
      expect(o.layer).toBe(f.layer);
      expect(o.scope).toBe(f.scope);
    }
    for (const o of training.ops()) if (o.phase === "forward" || o.phase === "optimizer") expect(o.forwardOp).toBeUndefined();
  });

  it("sums the gradients of a parameter used twice (wte.weight: embedding and tied lm_head)", () => {
    const grad = training.paramGrad("wte.weight")!;
    expect(training.paramGrad("lm_head.weight")).toBe(grad);
    const sum = producer(training, grad);
    expect(sum.op).toBe("add");
    expect(sum.phase).toBe("weight_grad");
    const parts = sum.inputs.map((t) => producer(training, t));
    expect(parts.map((p) => p.op).sort()).toEqual(["embedding_grad_weight", "linear_grad_weight"]);
    expect(parts.map((p) => training.op(p.forwardOp!).scope).sort()).toEqual(["lm_head", "wte"]);
  });

  it("sums the gradients of a residual stream read twice (by ln_1 and by the residual add)", () => {
    const x = training.ops().find((o) => o.op === "layer_norm" && o.scope === "layers.0.ln_1")!.inputs[0]!;
    expect(forward.consumers(x).map((id) => forward.op(id).op)).toEqual(["layer_norm", "add"]);
    const acc = gradientOps(training).filter((o) => o.op === "add" && o.forwardOp === forward.consumers(x)[0]);
    expect(acc.length).toBe(1);
    expect(acc[0]!.phase).toBe("backward");
  });

  it("computes weight gradients in separate ops that no input-gradient op reads", () => {
    const weightOutputs = new Set(training.ops().filter((o) => o.phase === "weight_grad").flatMap((o) => o.outputs));
    for (const o of training.ops().filter((op) => op.phase === "backward")) {
      for (const t of o.inputs) expect(weightOutputs.has(t), `${o.op} (op ${o.id}) reads a weight gradient`).toBe(false);
    }
    for (const [name, t] of training.paramGrads()) expect(producer(training, t).phase, name).toBe("weight_grad");
    // Each module op: its input gradient and its weight gradients come from different ops.
    for (const f of forward.ops().filter((o) => getOp(o.op)!.kind === "module" && o.op !== "embedding")) {
      const linked = gradientOps(training).filter((o) => o.forwardOp === f.id);
      expect(linked.some((o) => o.phase === "backward"), f.scope).toBe(true);
      expect(linked.some((o) => o.phase === "weight_grad"), f.scope).toBe(true);
    }
  });

  it("orders gradient ops back through the layers", () => {
    for (const phase of ["backward", "weight_grad"]) {
      const layers = training.ops().filter((o) => o.phase === phase).map((o) => o.layer);
      expect(layers).toEqual([...layers].sort((a, b) => b - a));
    }
  });

  it("updates every parameter and its Adam state in place, after every read", () => {
    expect(training.states().map((s) => s.role).filter((r) => r === "step")).toEqual(["step"]);
    expect(training.states().length).toBe(1 + 2 * training.params().length);
    const updates = training.updates();
    for (const p of training.params()) expect(updates.has(p.tensor), p.name).toBe(true);
    for (const s of training.states()) expect(updates.has(s.tensor), s.name).toBe(true);
    for (const [target, value] of updates) {
      expect(training.tensor(value).kind).toBe("update");
      const writer = training.tensor(value).producer!;
      expect(training.op(writer).phase).toBe("optimizer");
      expect(Math.max(...training.consumers(target))).toBeLessThanOrEqual(writer);
    }
  });

  it("keeps SGD momentum buffers only with momentum, and no step counter", () => {
    const { training: mlp } = trainSample("mlp");
    expect(mlp.states().map((s) => s.role)).toEqual(mlp.params().map(() => "momentum"));
    expect(mlp.ops().filter((o) => o.phase === "optimizer").map((o) => o.op)).toEqual(mlp.params().map(() => "sgd_update"));
  });
});

describe("saved for backward", () => {
  const { training } = trainSample("mlp");

  it("lists, per gradient op, the forward tensors it reads (no parameters)", () => {
    const saved = savedForBackward(training);
    for (const [op, tensors] of saved) {
      expect(["backward", "weight_grad"]).toContain(training.op(op).phase);
      for (const t of tensors) expect(["input", "activation"]).toContain(training.tensor(t).kind);
    }
    // relu's gradient reads the relu output; linear's weight gradient reads the linear input.
    const reluGrad = training.ops().find((o) => o.op === "relu_grad")!;
    expect(saved.get(reluGrad.id)).toEqual([reluGrad.inputs[1]]);
    expect(producer(training, reluGrad.inputs[1]!).op).toBe("relu");
    const byTensor = savedTensors(training);
    expect([...byTensor.keys()]).toEqual([...byTensor.keys()].sort((a, b) => a - b));
  });

  it("summarizes per layer what is kept without and with checkpointing", () => {
    const layers = savedByLayer(training);
    expect(layers.length).toBe(training.layers().length);
    const x = training.inputs()[0]!;
    const y = training.inputs()[1]!;
    // Layer 0 keeps the model input (its linear's weight gradient reads it) and its relu output.
    expect(layers[0]!.saved).toContain(x);
    expect(layers[0]!.boundary).toEqual([x]);
    // A hidden layer's boundary is the previous layer's output; the head also reads the targets.
    expect(layers[1]!.boundary.map((t) => producer(training, t).op)).toEqual(["relu"]);
    expect(layers[5]!.boundary).toContain(y);
    expect(layers[5]!.saved).toContain(y);
  });
});

describe("the pass and the pipeline", () => {
  it("runs autodiff from the pipeline, verifying after each pass", () => {
    const m = checkSample("gpt-tiny");
    const seen: string[] = [];
    const out = runPipeline(m.graph, { train: m.train! }, { verifyEach: true, after: (p) => seen.push(p.name) });
    expect(seen).toEqual(PIPELINE.map((p) => p.name));
    expect(seen[0]).toBe("autodiff");
    expect(out.isTraining()).toBe(true);
  });

  it("needs train settings, and refuses a graph that is already a training graph", () => {
    const m = checkSample("mlp");
    expect(() => autodiff.run(m.graph, {})).toThrow(/train settings/);
    const t = buildTrainingGraph(m.graph, m.train!);
    expect(() => buildTrainingGraph(t, m.train!)).toThrow(/already a training graph/);
  });
});

describe("internal ops stay out of the language", () => {
  it("are registered but neither listed for users nor callable", () => {
    expect(getOp("linear_grad_input")!.kind).toBe("internal");
    expect(opNames()).not.toContain("linear_grad_input");
    expect(languageOps().every((d) => d.kind !== "internal")).toBe(true);
    const r = checkSources({ "m.fsm": model("", "    return mse_loss(relu_grad(x, y), y)") });
    expect(codes(r)[0]).toMatch(/^FSM/);
    expect(r.model).toBeUndefined();
  });
});
