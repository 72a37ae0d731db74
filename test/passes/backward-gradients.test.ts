// The activation gradients a backward holds at once, per layer, against a hand count on the mlp sample.
import { describe, expect, it } from "vitest";
import { bytesOf } from "../../src/graph/ops/cost-rules.js";
import { BackwardWalk, backwardGradientPeaks } from "../../src/passes/backward-gradients.js";
import { savedByLayer } from "../../src/passes/saved-for-backward.js";
import { trainSample } from "./helpers.js";

describe("backwardGradientPeaks", () => {
  const { training } = trainSample("mlp");
  const B = 32;
  const bytes = (t: number): number => bytesOf(training.tensor(t).type, { B });
  const layers = training.layers().length;

  it("a hidden Dense(64, 64) layer holds two [B, 64] fp32 gradients at once", () => {
    // relu's gradient is made while the incoming one is still read, then linear's input gradient while
    // relu's is still read by the weight gradient: never three at once, always two. (The parameters'
    // gradients land in gradient buffers and do not count.)
    const peaks = backwardGradientPeaks(training, 0, layers, bytes);
    expect(peaks.map((p) => p.layer)).toEqual([...Array(layers).keys()].reverse());
    for (const name of ["hidden_layers.1", "hidden_layers.2"]) {
      const l = training.layers().findIndex((x) => x.name === name);
      expect(peaks.find((p) => p.layer === l)!.bytes, name).toBe(2 * B * 64 * 4);
    }
  });

  it("the first layer's input gradient, read by nothing, is not held", () => {
    // input_layer: relu's gradient [B, 64] and the incoming [B, 64]; linear's gradient of x is never read.
    const peaks = backwardGradientPeaks(training, 0, layers, bytes);
    expect(peaks.find((p) => p.layer === 0)!.bytes).toBe(2 * B * 64 * 4);
  });

  it("a stage's own range stands alone, and a stash given back early lowers the peak", () => {
    const l = training.layers().findIndex((x) => x.name === "hidden_layers.1");
    // Alone, the incoming gradient is a receive buffer and the outgoing one a send buffer: relu's is left.
    const alone = backwardGradientPeaks(training, l, l + 1, bytes);
    expect(alone).toEqual([{ layer: l, bytes: B * 64 * 4 }]);
    // The layer's saved tensors, all last read by its first gradient op or later: subtracting them can only
    // lower the peak, never below zero.
    const saved = savedByLayer(training)[l]!.saved;
    const less = backwardGradientPeaks(training, l, l + 1, bytes, () => saved)[0]!.bytes;
    expect(less).toBeLessThanOrEqual(B * 64 * 4);
    expect(less).toBeGreaterThanOrEqual(0);
  });
});

describe("backwardGradientPeaks with per-op scratch", () => {
  const { training } = trainSample("mlp");
  const bytes = (t: number): number => bytesOf(training.tensor(t).type, { B: 32 });
  const layers = training.layers().length;

  it("a scratch every op holds while it runs raises each layer's peak by exactly that much", () => {
    const plain = backwardGradientPeaks(training, 0, layers, bytes);
    const more = backwardGradientPeaks(training, 0, layers, bytes, () => [], () => 1000);
    expect(more.map((p) => p.bytes - 1000)).toEqual(plain.map((p) => p.bytes));
  });
});

describe("backwardGradientPeaks with a buffer that appears part-way through a layer", () => {
  const { training } = trainSample("mlp");
  const B = 32;
  const bytes = (t: number): number => bytesOf(training.tensor(t).type, { B });
  const l = training.layers().findIndex((x) => x.name === "hidden_layers.1");
  const ops = training.layers()[l]!.ops.filter((id) => ["backward", "weight_grad"].includes(training.op(id).phase));
  const first = ops[0]!;
  const wgrad = ops.find((id) => training.op(id).phase === "weight_grad")!;
  // A large scratch held by the layer's first gradient op only: the layer's peak is there.
  const S = 1_000_000;
  const scratch = (op: number): number => (op === first ? S : 0);

  it("an FSDP unit gradient made by the weight-gradient op does not add to a peak that came before it", () => {
    // The caller holds U = S bytes from the layer's start; the walk returns what the layer adds to them.
    // Alone the layer holds relu's [B, 64] gradient throughout (hand count above), so:
    //   U at the weight-gradient op: max(relu + S at the first op, relu + S at wgrad) − S = relu;
    //   U at the first op (as if it existed all along): max(relu + 2S, relu + S) − S = relu + S.
    const relu = B * 64 * 4;
    const late = backwardGradientPeaks(training, l, l + 1, bytes, () => [], scratch, (op) => (op === wgrad ? S : 0));
    const early = backwardGradientPeaks(training, l, l + 1, bytes, () => [], scratch, (op) => (op === first ? S : 0));
    expect(first).not.toBe(wgrad);
    expect(late).toEqual([{ layer: l, bytes: relu }]);
    expect(early).toEqual([{ layer: l, bytes: relu + S }]);
  });
});

describe("BackwardWalk.peakPair", () => {
  const { training } = trainSample("gpt-tiny");
  const bytes = (t: number): number => bytesOf(training.tensor(t).type, { B: 4, S: 64 });
  const layers = training.layers().length;
  const saved = savedByLayer(training);
  const released = (l: number) => saved[l]!.saved;
  // A scratch that depends on the op and on which operands die there, and an extra that differs by op, so a
  // pair walk that mixed them up, or added the extra to both, would differ from two walks.
  const scratch = (op: number, dying: (t: number) => boolean): number => training.op(op).inputs.filter(dying).length * 64 + (op % 7);
  const extra = (op: number): number => (training.op(op).phase === "weight_grad" ? 4096 + op : 0);

  it("gives in one walk what two walks give: without the extra and with it", () => {
    const walk = new BackwardWalk(training, 0, layers);
    const pair = walk.peakPair(bytes, released, scratch, extra);
    expect(pair.plain).toEqual(walk.peaks(bytes, released, scratch));
    expect(pair.withExtra).toEqual(walk.peaks(bytes, released, (op, dying) => scratch(op, dying) + extra(op)));
    // The extra matters somewhere, or the second comparison would prove nothing.
    expect(pair.withExtra).not.toEqual(pair.plain);
  });
});
