// verifyGraph: a sound graph passes, and each kind of broken invariant is reported.
import { describe, expect, it } from "vitest";
import { Graph } from "../../src/graph/graph.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { B, buildGpt, emit, ty } from "./helpers.js";

/** x → gelu (op 0), x → relu (op 1), add (op 2), mse_loss against y (op 3); two layers. */
function diamond(): Graph {
  const g = new Graph("diamond");
  const x = g.addInput("x", ty("f32", B, 4));
  const y = g.addInput("y", ty("f32", B, 4));
  const l0 = g.addLayer("a");
  const a = emit(g, "gelu", [x], {}, { scope: "a", layer: l0 });
  const b = emit(g, "relu", [x], {}, { scope: "a", layer: l0 });
  const l1 = g.addLayer("b");
  const s = emit(g, "add", [a, b], {}, { scope: "b", layer: l1 });
  g.setLoss(emit(g, "mse_loss", [s, y], {}, { scope: "b", layer: l1 }));
  return g;
}

/** Runs verifyGraph and checks that every expected fragment occurs in some message. */
function expectViolations(g: Graph, ...fragments: string[]): string[] {
  const v = verifyGraph(g);
  for (const f of fragments) expect(v.some((m) => m.includes(f)), `missing "${f}" in ${JSON.stringify(v, null, 1)}`).toBe(true);
  return v;
}

describe("verifyGraph", () => {
  it("accepts sound graphs, including unused activations", () => {
    expect(verifyGraph(diamond())).toEqual([]);
    const g = new Graph("gpt");
    buildGpt(g, { vocab: 64, ctx: 16, d: 32, heads: 4, nLayer: 2 });
    expect(verifyGraph(g)).toEqual([]);
    const unused = diamond();
    emit(unused, "silu", [unused.inputs()[0]!], {}, { scope: "b", layer: 1 });
    expect(verifyGraph(unused)).toEqual([]);
  });

  it("an operand that does not exist", () => {
    const g = diamond();
    g.unsafePatchOp(2, { inputs: [2, 99] });
    expectViolations(g, "op 2 (add in b): operand 1 is tensor %99, which does not exist");
  });

  it("an operand produced later (without a cycle)", () => {
    const g = diamond();
    g.unsafePatchOp(0, { inputs: [3] }); // gelu now reads relu's output
    const v = expectViolations(g, "op 0 (gelu in a): operand 0 is %3, produced by op 1, which does not come earlier");
    expect(v.some((m) => m.includes("cycle"))).toBe(false);
    expect(g.isAcyclic()).toBe(true);
    expect(g.topoOrder()).toEqual([1, 0, 2, 3]);
  });

  it("a cycle", () => {
    const g = diamond();
    g.unsafePatchOp(0, { inputs: [4] }); // gelu reads add's output; add reads gelu's
    expectViolations(g, "graph has a cycle through ops 0, 2");
    expect(g.isAcyclic()).toBe(false);
    expect(() => g.topoOrder()).toThrow(/cycle/);
    expect(g.consumers(4)).toEqual([0, 3]);
  });

  it("an output produced twice, and one produced by nobody", () => {
    const g = diamond();
    g.unsafePatchOp(1, { outputs: [2] });
    expectViolations(g, "activation %2 records producer op 0, but listed as an output of op 0, 1", "activation %3 records producer op 1, but no op lists it");
  });

  it("an input listed as an output", () => {
    const g = diamond();
    g.unsafePatchOp(0, { outputs: [2, 0] });
    expectViolations(g, "input x (%0) is listed as an output of op 0", "has 2 outputs, expected 1");
  });

  it("an unregistered op", () => {
    const g = diamond();
    g.unsafePatchOp(0, { op: "swish" });
    expectViolations(g, "op 0 (swish in a): 'swish' is not a registered op");
  });

  it("an output type that re-inference disagrees with", () => {
    const g = diamond();
    const x = g.inputs()[0]!;
    g.addOp({ op: "linear", attrs: { in: 4, out: 8, bias: false }, inputs: [x, g.addParam({ name: "w", type: ty("f32", 8, 4), init: "normal", layer: 1, scope: "" })], outputTypes: [ty("f32", B, 4)], scope: "lin", layer: 1 });
    expectViolations(g, "op 4 (linear in lin): output recorded as f32[B, 4] but infers f32[B, 8]");
  });

  it("re-inference that fails, and attributes the op rejects", () => {
    const g = diamond();
    g.addOp({ op: "gelu", attrs: {}, inputs: [g.addInput("ids", ty("i32", B))], outputTypes: [ty("i32", B)], scope: "", layer: 1 });
    g.addOp({ op: "softmax", attrs: { dim: 7 }, inputs: [g.inputs()[0]!], outputTypes: [ty("f32", B, 4)], scope: "", layer: 1 });
    g.addOp({ op: "scale", attrs: { factor: NaN }, inputs: [g.inputs()[0]!], outputTypes: [ty("f32", B, 4)], scope: "", layer: 1 });
    expectViolations(
      g,
      "op 4 (gelu): re-inference fails: gelu expects a floating-point input, got i32[B]",
      "op 5 (softmax): re-inference fails: softmax: dim 7 is out of range",
      "op 6 (scale): attributes rejected: scale: 'factor' must be finite",
    );
  });

  it("parameter operands that do not match the op's params()", () => {
    const g = diamond();
    const x = g.inputs()[0]!;
    const w = g.addParam({ name: "fc.weight", type: ty("f32", 8, 4), init: "normal", layer: 1, scope: "fc" });
    const b = g.addParam({ name: "fc.bias", type: ty("f32", 8), init: "zeros", layer: 1, scope: "fc" });
    const at = { attrs: { in: 4, out: 8 }, outputTypes: [ty("f32", B, 8)], scope: "fc", layer: 1 };
    g.addOp({ op: "linear", inputs: [x, b, w], ...at });
    g.addOp({ op: "linear", inputs: [x, w], ...at });
    g.addOp({ op: "linear", inputs: [x, w, x], ...at });
    expectViolations(
      g,
      "op 4 (linear in fc): parameter 'weight' should have shape [8, 4], got fc.bias f32[8]",
      "op 5 (linear in fc): expects 1 tensor operand(s) and 2 parameter(s), got 2 operands",
      "op 6 (linear in fc): operand for parameter 'bias' is input %0, not a parameter",
    );
  });

  it("layers out of order, missing, or disagreeing with the layer lists", () => {
    const g = diamond();
    g.addOp({ op: "gelu", attrs: {}, inputs: [g.inputs()[0]!], outputTypes: [ty("f32", B, 4)], scope: "late", layer: 0 });
    expectViolations(g, "op 4 (gelu in late): layer 0 comes after an op of layer 1");
    const h = diamond();
    h.unsafePatchOp(3, { layer: 9 });
    expectViolations(h, "op 3 (mse_loss in b): layer 9 does not exist", "recorded in layer 9 but listed in layer 1");
  });

  it("a parameter outside any layer, and an alias to nothing", () => {
    const g = new Graph("gpt");
    buildGpt(g, { vocab: 64, ctx: 16, d: 32, heads: 4, nLayer: 1 });
    g.unsafePatchParam("wpe.weight", { layer: 7 });
    g.unsafeAddAlias("head.weight", "nothing.weight");
    expectViolations(g, "parameter wpe.weight: layer 7 does not exist", "alias head.weight points to unknown parameter nothing.weight");
    const h = new Graph("gpt");
    buildGpt(h, { vocab: 64, ctx: 16, d: 32, heads: 4, nLayer: 1 });
    h.unsafePatchParam("wpe.weight", { layer: 1 });
    expectViolations(h, "parameter wpe.weight: recorded in layer 1 but not in its list");
  });

  it("a loss that is missing or not an f32 scalar", () => {
    const g = new Graph("noloss");
    const x = g.addInput("x", ty("f32", B));
    g.addLayer("a");
    expect(verifyGraph(g)).toEqual(["the loss is not set"]);
    const s = emit(g, "gelu", [x], {}, { scope: "", layer: 0 });
    g.setLoss(s);
    expect(verifyGraph(g)).toEqual(["the loss %1 must be an f32 scalar, got f32[B]"]);
    const h = new Graph("bf16loss");
    h.addLayer("a");
    h.setLoss(h.addInput("l", ty("bf16")));
    expect(verifyGraph(h)).toEqual(["the loss %0 must be an f32 scalar, got bf16[]"]);
  });
});
