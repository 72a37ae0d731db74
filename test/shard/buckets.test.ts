// Gradient buckets: the size cap, gradient-ready (back-to-front) order, per-owner buckets, all-reduce bytes.
import { describe, expect, it } from "vitest";
import { bucketCapBytes, packBuckets } from "../../src/shard/buckets.js";
import { gradientReadyOrder, stageParams } from "../../src/shard/stage-params.js";
import { sample, samplePlan, sum } from "./helpers.js";

describe("packBuckets", () => {
  it("closes a bucket before it would overflow; an oversized item travels alone", () => {
    const items = [5, 3, 4, 20, 1, 1].map((numel, i) => ({ name: `p${i}`, numel }));
    const b = packBuckets(items, 2, 16);
    expect(b.map((x) => x.params)).toEqual([["p0", "p1"], ["p2"], ["p3"], ["p4", "p5"]]);
    expect(b.map((x) => x.bytes)).toEqual([16, 8, 40, 4]);
    expect(b.map((x) => x.index)).toEqual([0, 1, 2, 3]);
  });

  it("bucketMB is MiB, as PyTorch's bucket_cap_mb", () => {
    expect(bucketCapBytes(25)).toBe(26_214_400);
    expect(() => bucketCapBytes(0)).toThrow(/positive/);
  });
});

describe("DDP buckets", () => {
  it("mlp: gradients become ready back to front, weight before bias", () => {
    const { training } = sample("mlp");
    const order = gradientReadyOrder(stageParams(training, { start: 0, end: training.layers().length })).map((p) => p.name);
    expect(order).toEqual([
      "head.weight", "head.bias",
      "hidden_layers.3.fc.weight", "hidden_layers.3.fc.bias",
      "hidden_layers.2.fc.weight", "hidden_layers.2.fc.bias",
      "hidden_layers.1.fc.weight", "hidden_layers.1.fc.bias",
      "hidden_layers.0.fc.weight", "hidden_layers.0.fc.bias",
      "input_layer.fc.weight", "input_layer.fc.bias",
    ]);
  });

  for (const [name, mb] of [["mlp", 0.02], ["gpt-tiny", 0.01], ["gpt2-124m", 25], ["gpt2-124m", 4], ["llama-7b", 25]] as const) {
    it(`${name}, ${mb} MB: buckets respect the cap, follow gradient-ready order, cover every gradient once`, () => {
      const plan = samplePlan(name, "none", 4, { bucketMB: mb });
      const cap = bucketCapBytes(mb);
      const byName = new Map(plan.params.map((p) => [p.name, p]));
      for (const b of plan.gradBuckets) {
        expect(b.bytes <= cap || b.params.length === 1, `bucket ${b.index}: ${b.bytes} > ${cap}`).toBe(true);
        expect(b.bytes).toBe(sum(b.params.map((p) => byName.get(p)!.numel)) * plan.bytesPerParam.grad);
      }
      const { training } = sample(name);
      const ready = gradientReadyOrder(stageParams(training, plan.layers)).map((p) => p.name);
      expect(plan.gradBuckets.flatMap((b) => b.params)).toEqual(ready);
      // Reverse order of use: the layers of consecutive buckets never go back up.
      const layers = plan.gradBuckets.map((b) => Math.min(...b.params.map((p) => byName.get(p)!.gradLayer!)));
      for (let i = 1; i < layers.length; i++) expect(layers[i]!).toBeLessThanOrEqual(layers[i - 1]!);
    });
  }

  it("a tied weight's gradient is ready at its first use: gpt-tiny's wte.weight comes last", () => {
    const plan = samplePlan("gpt-tiny", "none", 2, { bucketMB: 0.001 });
    expect(plan.gradBuckets.at(-1)!.params).toEqual(["wte.weight"]);
    expect(plan.params.find((p) => p.name === "wte.weight")!.gradLayer).toBe(0);
  });

  it("ShardedDDP buckets hold one owner's gradients each, in gradient-ready order per owner", () => {
    const plan = samplePlan("gpt2-124m", "sddp", 4, { bucketMB: 8 });
    const owner = new Map(plan.params.map((p) => [p.name, p.grad.kind === "owner" ? p.grad.rank : -1]));
    const { training } = sample("gpt2-124m");
    const ready = gradientReadyOrder(stageParams(training, plan.layers)).map((p) => p.name);
    for (const b of plan.gradBuckets) {
      expect(b.params.every((p) => owner.get(p) === b.owner)).toBe(true);
      const pos = b.params.map((p) => ready.indexOf(p));
      expect([...pos].sort((x, y) => x - y)).toEqual(pos);
    }
    expect(plan.gradBuckets.flatMap((b) => b.params).sort()).toEqual([...ready].sort());
    // Numbered in the order they complete.
    const last = plan.gradBuckets.map((b) => ready.indexOf(b.params.at(-1)!));
    expect([...last].sort((x, y) => x - y)).toEqual(last);
  });
});
