// Which forward graphs keep the samples of a batch apart (src/graph/batch-coupling.ts): per-sample models and
// the losses' own mean pass; reductions over B, Gram matrices, sample-pairing broadcasts, interleaving
// reshapes, positions(B) and non-affine maps of a loss are found, at the op that mixes.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { batchCoupling, batchLayoutProblem } from "../../src/graph/batch-coupling.js";
import { dim, symDim } from "../../src/graph/dim.js";
import { checkSources, model } from "../check/helpers.js";

/** The mixing op's name and why, or undefined, for a model with members and a forward body. */
function mixing(members: string, body: string, inputs?: string): { op: string; why: string } | undefined {
  const r = checkSources({ "m.fsm": model(members, body, inputs) });
  const m = r.model;
  expect(m, r.diagnostics.map((d) => d.message).join("\n")).toBeDefined();
  const c = batchCoupling(m!.graph);
  return c && { op: m!.graph.op(c.op).op, why: c.why };
}

const fc = "  fc = linear(4, 4)";

describe("batch coupling", () => {
  it("finds none in any sample", () => {
    const dir = join(import.meta.dirname, "../../samples");
    for (const f of readdirSync(dir).filter((f) => f.endsWith(".fsm"))) {
      const m = checkFile(join(dir, f)).model!;
      expect(batchCoupling(m.graph), f).toBeUndefined();
    }
  });

  it.each([
    ["softmax over the features", "return mse_loss(softmax(fc(x)), y)"],
    ["a sum and a scaled difference of losses", "return 2 * mse_loss(fc(x), y) + mse_loss(x, y) - mse_loss(fc(y), x) / 4"],
    ["a transpose then a reshape that keeps the samples' layout", "return mse_loss(reshape(transpose(reshape(fc(x), [B, 2, 2]), 0, 1), [2 * B, 2]), reshape(transpose(reshape(y, [B, 2, 2]), 0, 1), [2 * B, 2]))"],
    ["a per-sample matmul", "return mse_loss(reshape(matmul(reshape(fc(x), [B, 4, 1]), reshape(y, [B, 1, 4])), [B, 16]), reshape(matmul(reshape(y, [B, 4, 1]), reshape(x, [B, 1, 4])), [B, 16]))"],
  ])("keeps the samples apart: %s", (_what, body) => {
    expect(mixing(fc, `    ${body}`)).toBeUndefined();
  });

  it.each([
    ["softmax over dim 0", "return mse_loss(softmax(fc(x), dim: 0), y)", "softmax", /softmax over dim 0 .*batch dimension B/],
    ["softmax over dim -2 of [B, 4]", "return mse_loss(softmax(fc(x), dim: -2), y)", "softmax", /dim -2/],
    ["a Gram matrix", "return mse_loss(fc(matmul(transpose(x, 0, 1), x)), fc(matmul(transpose(y, 0, 1), y)))", "matmul", /contracts dimension 1 of its first operand/],
    ["sample-pair scores", "return mse_loss(reshape(matmul(fc(x), transpose(y, 0, 1)), [B * B]), reshape(matmul(x, transpose(x, 0, 1)), [B * B]))", "matmul", /pairs the samples/],
    ["an outer product over samples by broadcasting", "return mse_loss(reshape(reshape(fc(x), [B, 1, 4]) * reshape(y, [1, B, 4]), [B, B * 4]), reshape(reshape(x, [B, 1, 4]) * reshape(y, [1, B, 4]), [B, B * 4]))", "mul", /broadcasts the samples/],
    ["a reshape that interleaves samples", "return mse_loss(reshape(transpose(fc(x), 0, 1), [B, 4]), y)", "reshape", /interleaves/],
    ["a product of two losses", "return mse_loss(fc(x), y) * mse_loss(x, y)", "mul", /not an average over samples/],
    ["relu of a loss", "return relu(mse_loss(fc(x), y))", "relu", /not an average/],
    ["a loss broadcast back onto the samples", "return mse_loss(fc(x) * mse_loss(x, y), y)", "mul", /combines a loss/],
    ["a loss divided by a loss", "return mse_loss(fc(x), y) / mse_loss(x, y)", "div", /not an average/],
  ])("finds %s", (_what, body, op, why) => {
    const m = mixing(fc, `    ${body}`);
    expect(m?.op).toBe(op);
    expect(m?.why).toMatch(why);
  });

  it("finds positions(B), which numbers the samples within a micro-batch", () => {
    const tokens = "t: i32[B, S]";
    const p = mixing("  e = embedding(64, 4)\n  head = linear(4, 64)", "    return cross_entropy(head(e(t) + e(reshape(positions(B), [B, 1]))), t)", tokens);
    expect(p).toEqual({ op: "positions", why: "positions(B) numbers the samples within the batch dimension B" });
  });

  it("reports the first op that mixes on the way to the loss, and nothing for mixing the loss ignores", () => {
    expect(mixing(fc, "    h = softmax(fc(x), dim: 0)\n    return mse_loss(fc(x), y)")).toBeUndefined();
    expect(mixing(fc, "    h = softmax(fc(x), dim: 0)\n    return mse_loss(softmax(h, dim: 0), y)")?.why).toMatch(/softmax over dim 0/);
  });
});

describe("model inputs split by rows", () => {
  const B = symDim("B");
  it("need B first, once", () => {
    expect(batchLayoutProblem("x", { dtype: "f32", shape: [B, dim(4)] })).toBeUndefined();
    expect(batchLayoutProblem("x", { dtype: "f32", shape: [B, symDim("S"), dim(4)] })).toBeUndefined();
    expect(batchLayoutProblem("x", { dtype: "f32", shape: [dim(4), B] })?.dim).toBe(0);
    expect(batchLayoutProblem("x", { dtype: "f32", shape: [dim(4)] })?.message).toMatch(/'x' must have the batch dimension B first/);
    expect(batchLayoutProblem("x", { dtype: "f32", shape: [{ coef: 2, syms: { B: 1 } }, dim(4)] })?.dim).toBe(0);
    expect(batchLayoutProblem("x", { dtype: "f32", shape: [B, dim(2), B] })).toMatchObject({ dim: 2, message: expect.stringMatching(/B again in dimension 2/) });
  });
});
