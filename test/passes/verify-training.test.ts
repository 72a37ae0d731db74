// verifyGraph's training-graph rules, each broken on purpose: gradient links, phase order, weight gradients
// feeding input gradients, gradients of the wrong type, and reads after an in-place update.
import { describe, expect, it } from "vitest";
import { dim } from "../../src/graph/dim.js";
import { Graph, type TensorId } from "../../src/graph/graph.js";
import type { TensorType } from "../../src/graph/types.js";
import { verifyGraph } from "../../src/graph/verify.js";

const v4: TensorType = { dtype: "f32", shape: [dim(4)] };
const scalar: TensorType = { dtype: "f32", shape: [] };

/** loss = mse_loss(relu(p), x) with p a parameter [4]: a forward graph to extend by hand. */
function base(): { g: Graph; p: TensorId; x: TensorId; y: TensorId; loss: TensorId; layer: number } {
  const g = new Graph("t");
  const layer = g.addLayer("main");
  const x = g.addInput("x", v4);
  const p = g.addParam({ name: "p", type: v4, init: "normal", layer, scope: "" });
  const [y] = g.addOp({ op: "relu", attrs: {}, inputs: [p], outputTypes: [v4], scope: "", layer });
  const [loss] = g.addOp({ op: "mse_loss", attrs: {}, inputs: [y!, x], outputTypes: [scalar], scope: "", layer });
  g.setLoss(loss!);
  return { g, p, x, y: y!, loss: loss!, layer };
}

describe("verifyGraph on training graphs", () => {
  it("accepts a hand-built training step", () => {
    const { g, p, x, y, layer } = base();
    const [seed] = g.addOp({ op: "fill", attrs: { value: 1, shape: [] }, inputs: [], outputTypes: [scalar], scope: "", layer, phase: "backward", forwardOp: 1 });
    const [dy] = g.addOp({ op: "mse_loss_grad", attrs: {}, inputs: [seed!, y, x], outputTypes: [v4], scope: "", layer, phase: "backward", forwardOp: 1 });
    const [dp] = g.addOp({ op: "relu_grad", attrs: {}, inputs: [dy!, y], outputTypes: [v4], scope: "", layer, phase: "weight_grad", forwardOp: 0 });
    g.setParamGrad("p", dp!);
    const attrs = { lr: 0.1, momentum: 0, weight_decay: 0, nesterov: false, clip: false };
    const [np] = g.addOp({ op: "sgd_update", attrs, inputs: [p, dp!], outputTypes: [v4], scope: "", layer, phase: "optimizer", outputKind: "update" });
    g.setUpdate(p, np!);
    expect(verifyGraph(g)).toEqual([]);
  });

  it("reports a gradient op without a forward op, and one linked to a non-forward op", () => {
    const { g, y, x, layer } = base();
    const [seed] = g.addOp({ op: "fill", attrs: { value: 1, shape: [] }, inputs: [], outputTypes: [scalar], scope: "", layer, phase: "backward" });
    g.addOp({ op: "mse_loss_grad", attrs: {}, inputs: [seed!, y, x], outputTypes: [v4], scope: "", layer, phase: "backward", forwardOp: 2 });
    expect(verifyGraph(g)).toEqual([
      "op 2 (fill): backward op has no forward op",
      "op 3 (mse_loss_grad): links to op 2, which is not an earlier forward op",
    ]);
  });

  it("reports a forward op after the backward has begun, and an input gradient reading a weight gradient", () => {
    const { g, y, x, layer } = base();
    const [seed] = g.addOp({ op: "fill", attrs: { value: 1, shape: [] }, inputs: [], outputTypes: [scalar], scope: "", layer, phase: "weight_grad", forwardOp: 1 });
    g.addOp({ op: "mse_loss_grad", attrs: {}, inputs: [seed!, y, x], outputTypes: [v4], scope: "", layer, phase: "backward", forwardOp: 1 });
    g.addOp({ op: "relu", attrs: {}, inputs: [x], outputTypes: [v4], scope: "", layer });
    expect(verifyGraph(g)).toEqual([
      `op 3 (mse_loss_grad): backward op reads operand 0 %${seed}, a weight_grad value`,
      "op 4 (relu): forward op after a gradient or optimizer op",
    ]);
  });

  it("reports a gradient of the wrong type and a read of a parameter after its update", () => {
    const { g, p, x, layer } = base();
    const [seed] = g.addOp({ op: "fill", attrs: { value: 1, shape: [] }, inputs: [], outputTypes: [scalar], scope: "", layer, phase: "backward", forwardOp: 1 });
    g.setParamGrad("p", seed!);
    const [dp] = g.addOp({ op: "fill", attrs: { value: 0, shape: [dim(4)] }, inputs: [], outputTypes: [v4], scope: "", layer, phase: "backward", forwardOp: 1 });
    const attrs = { lr: 0.1, momentum: 0, weight_decay: 0, nesterov: false, clip: false };
    const [np] = g.addOp({ op: "sgd_update", attrs, inputs: [p, dp!], outputTypes: [v4], scope: "", layer, phase: "optimizer", outputKind: "update" });
    g.setUpdate(p, np!);
    g.addOp({ op: "add", attrs: {}, inputs: [p, x], outputTypes: [v4], scope: "", layer, phase: "optimizer" });
    expect(verifyGraph(g)).toEqual([
      "gradient of p is f32[], the parameter f32[4]",
      `p is read by op 5 after op 4 updates it`,
    ]);
  });

  it("reports multi-output ops whose outputs disagree with the registry", () => {
    const { g, p, layer } = base();
    const attrs = { lr: 0.1, momentum: 0.9, weight_decay: 0, nesterov: false, clip: false };
    const buf = g.addState({ name: "p.momentum_buffer", type: v4, role: "momentum", param: "p" });
    // sgd_update with momentum has two outputs; record only one.
    g.addOp({ op: "sgd_update", attrs, inputs: [p, p, buf], outputTypes: [v4], scope: "", layer, phase: "optimizer", outputKind: "update" });
    expect(verifyGraph(g)).toContain("op 2 (sgd_update): has 1 outputs, expected 2");
    expect(verifyGraph(g)).toContain("update tensor %5 replaces no parameter or state");
  });
});
