// What a forward holds beyond its stash, per layer, against a hand count on the mlp sample.
import { describe, expect, it } from "vitest";
import { bytesOf } from "../../src/graph/ops/cost-rules.js";
import { forwardWorkingPeaks } from "../../src/passes/forward-working-set.js";
import { trainSample } from "./helpers.js";

describe("forwardWorkingPeaks", () => {
  const { training } = trainSample("mlp");
  const B = 32;
  const bytes = (t: number): number => bytesOf(training.tensor(t).type, { B });
  const layers = training.layers().length;
  const index = (name: string): number => training.layers().findIndex((x) => x.name === name);
  const forwardOutputs = new Set(training.ops().filter((o) => o.phase === "forward").flatMap((o) => o.outputs));

  it("keeping nothing, a Dense(64, 64) layer holds two [B, 64] fp32 values at once", () => {
    // linear reads the previous layer's output while it makes its own; relu reads linear's output (its
    // last read) while it makes its own: never three at once, always two.
    const peaks = forwardWorkingPeaks(training, 0, layers, bytes, new Set());
    expect(peaks.map((p) => p.layer)).toEqual([...Array(layers).keys()]);
    for (const name of ["input_layer", "hidden_layers.0", "hidden_layers.3"]) expect(peaks[index(name)]!.bytes, name).toBe(2 * B * 64 * 4);
  });

  it("what is held elsewhere does not count: holding every forward value leaves nothing", () => {
    const peaks = forwardWorkingPeaks(training, 0, layers, bytes, forwardOutputs);
    expect(peaks.every((p) => p.bytes === 0)).toBe(true);
  });

  it("holding the layer's output (the stage's send) leaves linear's output alone", () => {
    const l = index("hidden_layers.1");
    const relu = training.layers()[l]!.ops.map((id) => training.op(id)).find((o) => o.op === "relu")!;
    const alone = forwardWorkingPeaks(training, l, l + 1, bytes, new Set(relu.outputs));
    // The layer's input is made on another stage; the output is held: linear's [B, 64] alone is left.
    expect(alone).toEqual([{ layer: l, bytes: B * 64 * 4 }]);
  });

  it("a scratch every op holds while it runs raises each layer's peak by exactly that much", () => {
    const plain = forwardWorkingPeaks(training, 0, layers, bytes, new Set());
    const more = forwardWorkingPeaks(training, 0, layers, bytes, new Set(), () => 1000);
    expect(more.map((p) => p.bytes - 1000)).toEqual(plain.map((p) => p.bytes));
  });
});
