// Where a backward first writes each parameter's gradient, on gpt-tiny (its lm_head ties wte.weight).
import { describe, expect, it } from "vitest";
import { numel } from "../../src/graph/dim.js";
import { firstGradientWrites, gradientOwners } from "../../src/passes/gradient-writes.js";
import { trainSample } from "./helpers.js";

describe("firstGradientWrites", () => {
  const { training } = trainSample("gpt-tiny");
  const owners = gradientOwners(training);
  const layers = training.layers();
  const index = (name: string): number => layers.findIndex((l) => l.name === name);

  it("every parameter once, in backward run order (layers descending)", () => {
    const writes = firstGradientWrites(training, 0, layers.length, owners);
    expect(writes.map((w) => w.param).sort()).toEqual([...training.paramGrads().keys()].sort());
    for (let i = 1; i < writes.length; i++) expect(writes[i]!.layer).toBeLessThanOrEqual(writes[i - 1]!.layer);
    // Each write's op makes a gradient (or a partial) of its parameter, of the parameter's size.
    for (const w of writes) {
      const made = training.op(w.op).outputs.filter((t) => owners.get(t) === w.param);
      expect(made.length, w.param).toBeGreaterThan(0);
      expect(w.numel, w.param).toBe(numel(training.params().find((p) => p.name === w.param)!.type.shape));
    }
  });

  it("the tied embedding is first written by the output layer, the embedding's own partial later", () => {
    const wte = firstGradientWrites(training, 0, layers.length, owners).find((w) => w.param === "wte.weight")!;
    expect(wte.layer).toBe(index("lm_head"));
    // On a stage without the head, the embedding layer's own partial is the first write.
    const alone = firstGradientWrites(training, 0, index("lm_head"), owners).find((w) => w.param === "wte.weight")!;
    expect(alone.layer).toBe(index("wte"));
  });
});
