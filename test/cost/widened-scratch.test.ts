// What an op adds while it runs on the CPU runtime under mixed precision (its kernels compute in f32 on
// widened copies), by hand on the mlp sample's hidden Dense(64, 64) layer at B = 32.
import { describe, expect, it } from "vitest";
import { widenedScratch } from "../../src/cost/precision.js";
import { trainSample } from "../passes/helpers.js";

describe("widenedScratch", () => {
  const { training } = trainSample("mlp");
  const B = 32;
  const layer = training.layers().find((x) => x.name === "hidden_layers.1")!;
  const op = (name: string) => layer.ops.find((id) => training.op(id).op === name)!;
  const row = B * 64; // elements of a [B, 64] activation or gradient

  it("relu_grad: both 16-bit operands widened, plus its f32 result beside the 16-bit one it becomes", () => {
    // Kernel moment: widened dy and x (2 × 4 bytes) + the f32 result (4), less the 16-bit result (2) the
    // caller already counts from the op on.
    expect(widenedScratch(training, "bf16", { B })(op("relu_grad"))).toBe(row * (8 + 4 - 2));
    // x read for the last time: its 16-bit bytes are gone once widened.
    const x = training.op(op("relu_grad")).inputs[1]!;
    expect(widenedScratch(training, "fp16", { B })(op("relu_grad"), (t) => t === x)).toBe(row * (8 + 4 - 2 - 2));
  });

  it("linear_grad_input widens the weights' 16-bit copy too; a parameter gradient stays f32, so no narrowing", () => {
    expect(widenedScratch(training, "bf16", { B })(op("linear_grad_input"))).toBe((row + 64 * 64) * 4 + row * 2);
    // linear_grad_weight: dy and x widened; its result is the weight's (f32) gradient.
    expect(widenedScratch(training, "bf16", { B })(op("linear_grad_weight"))).toBe(2 * row * 4);
  });

  it("nothing in fp32", () => {
    for (const id of layer.ops) expect(widenedScratch(training, "fp32", { B })(id)).toBe(0);
  });
});
