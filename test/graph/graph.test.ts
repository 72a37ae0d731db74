// The graph IR: building, queries, tied parameters, the printed text, DOT, the summary, and build speed.
import { describe, expect, it } from "vitest";
import { numel } from "../../src/graph/dim.js";
import { graphToDot } from "../../src/graph/dot.js";
import { Graph } from "../../src/graph/graph.js";
import { printGraph } from "../../src/graph/print.js";
import { getOp } from "../../src/graph/registry.js";
import { graphSummary } from "../../src/graph/summary.js";
import type { Attrs } from "../../src/graph/types.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { B, buildGpt, emit, gptBlock, S, ty } from "./helpers.js";

/** samples/mlp.fsm cut down to two layers: Dense(4 → 8) then a linear head and MSE. */
function smallMlp(): Graph {
  const g = new Graph("mlp");
  const x = g.addInput("x", ty("f32", B, 4));
  const y = g.addInput("y", ty("f32", B, 2));
  const l0 = g.addLayer("input_layer", { stage: 0, fsdpUnit: true });
  const h = emit(g, "relu", [emit(g, "linear", [x], { in: 4, out: 8 }, { scope: "input_layer.fc", layer: l0 })], {}, { scope: "input_layer", layer: l0 });
  const l1 = g.addLayer("head", { checkpoint: true });
  const p = emit(g, "linear", [emit(g, "scale", [h], { factor: 0.5 }, { scope: "", layer: l1 })], { in: 8, out: 2 }, { scope: "head", layer: l1 });
  g.setLoss(emit(g, "mse_loss", [p, y], {}, { scope: "", layer: l1 }));
  return g;
}

describe("Graph", () => {
  it("prints a stable text form", () => {
    expect(printGraph(smallMlp())).toBe(
      [
        "model mlp  (58 parameters)",
        "input %x : f32[B, 4]",
        "input %y : f32[B, 2]",
        "layer 0 input_layer  [params: 40]  @stage(0) @fsdp_unit",
        "  param input_layer.fc.weight : f32[8, 4] = uniform_fan_in",
        "  param input_layer.fc.bias : f32[8] = zeros",
        "  %4 = linear(%x, input_layer.fc.weight, input_layer.fc.bias) {in: 4, out: 8} : f32[B, 8]  # input_layer.fc",
        "  %5 = relu(%4) : f32[B, 8]  # input_layer",
        "layer 1 head  [params: 18]  @checkpoint",
        "  param head.weight : f32[2, 8] = uniform_fan_in",
        "  param head.bias : f32[2] = zeros",
        "  %6 = scale(%5) {factor: 0.5} : f32[B, 8]",
        "  %9 = linear(%6, head.weight, head.bias) {in: 8, out: 2} : f32[B, 2]  # head",
        "  %10 = mse_loss(%9, %y) : f32[]",
        "loss %10 : f32[]",
        "",
      ].join("\n"),
    );
  });

  it("records tensors, layers and producers", () => {
    const g = smallMlp();
    expect(verifyGraph(g)).toEqual([]);
    expect(g.model).toBe("mlp");
    expect(g.inputs().map((t) => g.tensor(t).name)).toEqual(["x", "y"]);
    expect(g.tensor(g.param("head.weight")!.tensor)).toMatchObject({ kind: "param", name: "head.weight" });
    expect(g.tensor(4)).toMatchObject({ kind: "activation", producer: 0, name: "%4" });
    expect(g.layers().map((l) => [l.index, l.name, l.ops, l.params])).toEqual([
      [0, "input_layer", [0, 1], ["input_layer.fc.weight", "input_layer.fc.bias"]],
      [1, "head", [2, 3, 4], ["head.weight", "head.bias"]],
    ]);
    expect(g.ops().map((o) => o.op)).toEqual(["linear", "relu", "scale", "linear", "mse_loss"]);
    expect(g.op(3).inputs).toEqual([6, 7, 8]);
    expect(g.loss).toBe(10);
    expect(g.consumers(4)).toEqual([1]);
    expect(g.consumers(g.inputs()[1]!)).toEqual([4]);
    expect(g.consumers(10)).toEqual([]);
    expect(g.topoOrder()).toEqual([0, 1, 2, 3, 4]);
    expect(g.isAcyclic()).toBe(true);
  });

  it("keeps one edge per operand slot, so x·x is two edges but one consumer", () => {
    const g = new Graph("sq");
    const x = g.addInput("x", ty("f32", B));
    const l = g.addLayer("only");
    const sq = emit(g, "mul", [x, x], {}, { scope: "", layer: l });
    g.setLoss(emit(g, "mse_loss", [sq, sq], {}, { scope: "", layer: l }));
    expect(g.consumers(x)).toEqual([0]);
    expect(g.consumers(sq)).toEqual([1]);
    expect(graphToDot(g).match(/-> op\d+ /g)).toHaveLength(4);
    expect(verifyGraph(g)).toEqual([]);
  });

  it("names activations when asked", () => {
    const g = new Graph("n");
    const x = g.addInput("x", ty("f32", 3));
    const l = g.addLayer("only");
    const [h] = g.addOp({ op: "gelu", attrs: {}, inputs: [x], outputTypes: [ty("f32", 3)], scope: "", layer: l, name: "h" });
    expect(g.tensor(h!).name).toBe("h");
  });

  it("refuses ill-formed builds with internal errors", () => {
    const g = new Graph("bad");
    const x = g.addInput("x", ty("f32", 3));
    expect(() => g.addOp({ op: "gelu", attrs: {}, inputs: [x], outputTypes: [ty("f32", 3)], scope: "", layer: 0 })).toThrow(/layer 0 does not exist/);
    const l = g.addLayer("only");
    expect(() => g.addOp({ op: "gelu", attrs: {}, inputs: [99], outputTypes: [ty("f32", 3)], scope: "", layer: l })).toThrow(/unknown tensor %99/);
    g.addParam({ name: "w", type: ty("f32", 3), init: "ones", layer: l, scope: "" });
    expect(() => g.addParam({ name: "w", type: ty("f32", 3), init: "ones", layer: l, scope: "" })).toThrow(/defined twice/);
    expect(() => g.aliasParam("v", "nope")).toThrow(/unknown parameter/);
    expect(() => g.setLoss(42)).toThrow(/unknown tensor/);
    expect(() => g.tensor(42)).toThrow(/unknown tensor/);
  });
});

describe("tied parameters", () => {
  it("resolve through the alias and count once", () => {
    const g = new Graph("gpt_tiny");
    buildGpt(g, { vocab: 64, ctx: 16, d: 32, heads: 4, nLayer: 2 });
    expect(verifyGraph(g)).toEqual([]);
    const wte = g.param("wte.weight")!;
    expect(g.param("lm_head.weight")).toBe(wte);
    expect(wte.aliases).toEqual(["lm_head.weight"]);
    expect([...g.aliases()]).toEqual([["lm_head.weight", "wte.weight"]]);
    expect(g.params().some((p) => p.name === "lm_head.weight")).toBe(false);
    const lmHead = g.ops().find((o) => o.scope === "lm_head")!;
    expect(lmHead.inputs[1]).toBe(wte.tensor);
    expect(g.consumers(wte.tensor)).toEqual([0, lmHead.id]);
    const sum = g.params().reduce((n, p) => n + numel(p.type.shape), 0);
    expect(g.parameterCount()).toBe(sum);
    expect(printGraph(g)).toContain("param wte.weight : f32[64, 32] = normal  (tied: lm_head.weight)");
    expect(printGraph(g)).toContain("linear(%");
    expect(printGraph(g)).toMatch(/linear\(%\d+, wte\.weight\) \{in: 32, out: 64, bias: false, tie: wte\.weight\}/);
  });

  it("GPT-2 small has 124,439,808 parameters and 7,087,872 per block", () => {
    const g = new Graph("gpt2");
    buildGpt(g, { vocab: 50257, ctx: 1024, d: 768, heads: 12, nLayer: 12 });
    expect(verifyGraph(g)).toEqual([]);
    expect(g.parameterCount()).toBe(124_439_808);
    expect(printGraph(g)).toMatch(/^model gpt2 {2}\(124,439,808 parameters\)\n/);
    expect(printGraph(g)).toContain("layer 3 layers.2  [params: 7,087,872]");
    const s = graphSummary(g);
    expect(s.layers.map((l) => l.parameters)).toEqual([50257 * 768 + 1024 * 768, ...Array(12).fill(7_087_872), 1536]);
  });

  it("the block formula from the registry's params()", () => {
    const count = (op: string, attrs: Attrs) => getOp(op)!.params!(attrs).reduce((n, p) => n + numel(p.shape), 0);
    const d = 768;
    const ln1 = count("layer_norm", { d });
    const attn = count("attention", { d, heads: 12 });
    const ln2 = count("layer_norm", { d });
    const mlp = count("linear", { in: d, out: 4 * d }) + count("linear", { in: 4 * d, out: d });
    expect([ln1, attn, ln2, mlp]).toEqual([1536, 2_362_368, 1536, 4_722_432]);
    expect(ln1 + attn + ln2 + mlp).toBe(7_087_872);
  });
});

describe("graphToDot", () => {
  it("draws one cluster per layer and labels edges with shapes", () => {
    const g = new Graph("gpt_tiny");
    buildGpt(g, { vocab: 64, ctx: 16, d: 32, heads: 4, nLayer: 3 });
    const dot = graphToDot(g);
    expect(dot.startsWith('digraph "gpt_tiny" {\n')).toBe(true);
    expect(dot.match(/subgraph cluster_\d+ \{/g)).toHaveLength(g.layers().length);
    for (const l of g.layers()) expect(dot).toContain(`subgraph cluster_${l.index} {\n    label="layer ${l.index}: ${l.name}";`);
    expect(dot).toContain('op5 [label="attention\\nf32[B, S, 32]", tooltip="layers.0.attn"];');
    expect(dot).toContain('op4 -> op5 [label="[B, S, 32]"];');
    expect(dot).not.toContain("wte.weight");
    expect(graphToDot(g, { params: true })).toContain('[label="wte.weight\\nf32[64, 32]", shape=note, fontsize=8];');
    expect(dot.trimEnd().endsWith("}")).toBe(true);
  });

  it("escapes quotes and backslashes", () => {
    const g = new Graph('we"ird\\name');
    g.addLayer('la"yer');
    expect(graphToDot(g)).toContain('digraph "we\\"ird\\\\name" {');
    expect(graphToDot(g)).toContain('label="layer 0: la\\"yer";');
  });
});

describe("graphSummary", () => {
  it("counts parameters, tensors, ops and op kinds", () => {
    const g = new Graph("gpt_tiny");
    buildGpt(g, { vocab: 64, ctx: 16, d: 32, heads: 4, nLayer: 2 });
    const s = graphSummary(g);
    expect(s.model).toBe("gpt_tiny");
    expect(s.parameters).toBe(g.parameterCount());
    expect(s.parameterTensors).toBe(2 + 12 * 2 + 2);
    expect(s.ops).toBe(4 + 8 * 2 + 3);
    expect(s.opCounts).toEqual({
      add: 1 + 2 * 2, attention: 2, cross_entropy: 1, embedding: 2, gelu: 2, layer_norm: 2 * 2 + 1, linear: 2 * 2 + 1, positions: 1,
    });
    expect(Object.keys(s.opCounts)).toEqual(Object.keys(s.opCounts).sort());
    expect(s.layers.map((l) => [l.index, l.name, l.ops])).toEqual([[0, "embed", 4], [1, "layers.0", 8], [2, "layers.1", 8], [3, "head", 3]]);
    expect(s.inputs).toEqual([{ name: "tokens", type: "i32[B, S]" }, { name: "targets", type: "i32[B, S]" }]);
    expect(s.params[0]).toEqual({ name: "wte.weight", shape: ["64", "32"], dtype: "f32", numel: 2048, layer: 0, aliases: ["lm_head.weight"] });
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
  });
});

describe("scale", () => {
  it("builds a 2,000-layer, 40,000-op model quickly (timing logged, not asserted)", () => {
    const t0 = performance.now();
    const g = new Graph("deep");
    const x = g.addInput("x", ty("f32", B, S, 16));
    let h = x;
    for (let i = 0; i < 2000; i++) {
      const l = g.addLayer(`layers.${i}`);
      h = gptBlock(g, h, 16, 2, `layers.${i}`, l);
      // Pad each layer to 20 ops with cheap elementwise work.
      for (let j = 0; j < 6; j++) h = emit(g, "add", [h, emit(g, "gelu", [h], {}, { scope: `layers.${i}`, layer: l })], {}, { scope: `layers.${i}`, layer: l });
    }
    const head = g.addLayer("head");
    g.setLoss(emit(g, "mse_loss", [h, x], {}, { scope: "", layer: head }));
    const built = performance.now();
    expect(g.ops().length).toBe(2000 * 20 + 1);
    const order = g.topoOrder();
    const sorted = performance.now();
    const problems = verifyGraph(g);
    const verified = performance.now();
    const text = printGraph(g);
    const printed = performance.now();
    expect(order).toEqual(g.ops().map((o) => o.id));
    expect(problems).toEqual([]);
    expect(text.length).toBeGreaterThan(0);
    console.log(
      `2,000 layers / ${g.ops().length} ops: build incl. registry rules ${(built - t0).toFixed(0)} ms, topo ${(sorted - built).toFixed(0)} ms, ` +
        `verify ${(verified - sorted).toFixed(0)} ms, print ${(printed - verified).toFixed(0)} ms`,
    );
  });
});
