// FSDP units: from @fsdp_unit annotations, from the size policy, the root unit; flat parameters, padding and
// shards; the per-unit collectives with and without reshard_after_forward.
import { describe, expect, it } from "vitest";
import { formatPoint } from "../../src/shard/points.js";
import type { ShardPlan } from "../../src/shard/types.js";
import { sample, samplePlan, sum } from "./helpers.js";

/** Each unit's collectives and frees as `KIND point` lines. */
function unitLines(plan: ShardPlan, unit: number): string[] {
  return [
    ...plan.collectives.filter((c) => c.of === "unit" && c.unit === unit).map((c) => `${c.kind} ${formatPoint(c.at)}`),
    ...plan.frees.filter((f) => f.unit === unit).map((f) => `FREE ${formatPoint(f.at)}`),
  ];
}

describe("FSDP units", () => {
  it("llama-7b: one unit per @fsdp_unit layer, the rest (embedding, norm, head) in the root", () => {
    const plan = samplePlan("llama-7b", "fsdp", 8);
    const { model } = sample("llama-7b");
    expect(plan.units).toHaveLength(33);
    const root = plan.units[0]!;
    expect(root).toMatchObject({ index: 0, root: true, layers: [0, 33, 34] });
    expect(root.params.map((m) => m.name)).toEqual(["tok_embeddings.weight", "norm.weight", "output.weight"]);
    for (let i = 1; i <= 32; i++) {
      const u = plan.units[i]!;
      expect(u.root).toBe(false);
      expect(u.layers).toEqual([i]);
      expect(u.params.map((m) => m.name)).toEqual(model.graph.layers()[i]!.params);
      expect(u.numel).toBe(202_383_360);
    }
    expect(sum(plan.units.map((u) => u.numel))).toBe(model.graph.parameterCount());
  });

  it("size policy: consecutive layers until the unit reaches fsdp_min_params; the tail goes to the root", () => {
    // mlp layers hold 2112, 4160 × 4 and 520 parameters.
    const plan = samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000 });
    expect(plan.units.map((u) => ({ layers: u.layers, root: u.root, numel: u.numel }))).toEqual([
      { layers: [0, 1], root: false, numel: 6272 },
      { layers: [2], root: false, numel: 4160 },
      { layers: [3], root: false, numel: 4160 },
      { layers: [4], root: false, numel: 4160 },
      { layers: [5], root: true, numel: 520 },
    ]);
    // The default threshold (1e8) is never reached: everything is the root.
    const whole = samplePlan("mlp", "fsdp", 4);
    expect(whole.units.map((u) => [u.layers, u.root])).toEqual([[[0, 1, 2, 3, 4, 5], true]]);
  });

  it("gpt2-124m size policy at 2e7: every inner unit is minimal (drop its last layer and it falls short)", () => {
    const { model } = sample("gpt2-124m");
    const threshold = 2e7;
    const plan = samplePlan("gpt2-124m", "fsdp", 8, { fsdpMinParams: threshold });
    const perLayer = (l: number) => sum(model.graph.layers()[l]!.params.map((p) => plan.params.find((q) => q.name === p)!.numel));
    const inner = plan.units.filter((u) => !u.root);
    expect(inner.length).toBeGreaterThan(1);
    for (const u of inner) {
      expect(u.numel).toBeGreaterThanOrEqual(threshold);
      expect(u.numel - perLayer(u.layers.at(-1)!)).toBeLessThan(threshold);
      // Consecutive layers.
      u.layers.forEach((l, i) => i > 0 && expect(l).toBe(u.layers[i - 1]! + 1));
    }
    const root = plan.units.find((u) => u.root);
    if (root) expect(root.numel).toBeLessThan(threshold);
  });

  for (const n of [1, 2, 3, 4, 7, 8, 64]) {
    it(`flat parameters padded to a multiple of ${n}, shards equal, members packed in declaration order`, () => {
      for (const name of ["mlp", "gpt-tiny", "llama-7b"] as const) {
        const plan = samplePlan(name, "fsdp", n, { fsdpMinParams: name === "llama-7b" ? 1e8 : 3000 });
        const declared = plan.params.map((p) => p.name);
        for (const u of plan.units) {
          expect(u.paddedNumel % n).toBe(0);
          expect(u.padding).toBe(u.paddedNumel - u.numel);
          expect(u.padding).toBeGreaterThanOrEqual(0);
          expect(u.padding).toBeLessThan(n);
          expect(u.shardNumel * n).toBe(u.paddedNumel);
          let offset = 0;
          for (const m of u.params) {
            expect(m.offset).toBe(offset);
            offset += m.numel;
          }
          expect(offset).toBe(u.numel);
          const pos = u.params.map((m) => declared.indexOf(m.name));
          expect([...pos].sort((a, b) => a - b)).toEqual(pos);
          expect(u.shards.map((s) => s.offset)).toEqual(Array.from({ length: n }, (_, r) => r * u.shardNumel));
          // Every element of every member lies in exactly one shard; padding in none.
          expect(sum(u.shards.flatMap((s) => s.pieces.map((p) => p.to - p.from)))).toBe(u.numel);
        }
      }
    });
  }

  it("shard pieces split a parameter at the shard boundary", () => {
    // mlp, one root unit of 19272 elements over 5 ranks: shards of 3855, padding 3.
    const plan = samplePlan("mlp", "fsdp", 5);
    const u = plan.units[0]!;
    expect([u.shardNumel, u.paddedNumel, u.padding]).toEqual([3855, 19275, 3]);
    // input_layer.fc.weight is 2048 elements, bias 64, then hidden_layers.0.fc.weight at 2112.
    expect(u.shards[0]!.pieces).toEqual([
      { name: "input_layer.fc.weight", from: 0, to: 2048 },
      { name: "input_layer.fc.bias", from: 0, to: 64 },
      { name: "hidden_layers.0.fc.weight", from: 0, to: 1743 },
    ]);
    expect(u.shards[1]!.pieces[0]).toEqual({ name: "hidden_layers.0.fc.weight", from: 1743, to: 4096 });
  });
});

describe("FSDP collectives", () => {
  it("reshard_after_forward = true: gathers before forward AND backward, every micro-batch", () => {
    const plan = samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000, reshardAfterForward: true });
    expect(unitLines(plan, 1)).toEqual([
      "ALL_GATHER before forward of layer 2, each micro-batch",
      "ALL_GATHER before backward of layer 2, each micro-batch",
      "REDUCE_SCATTER after weight_grad of layer 2, each micro-batch",
      "FREE after forward of layer 2, each micro-batch",
      "FREE after backward of layer 2, each micro-batch",
    ]);
    expect(unitLines(plan, 0)).toEqual([
      "ALL_GATHER before forward of layer 0, each micro-batch",
      "ALL_GATHER before backward of layer 1, each micro-batch",
      "REDUCE_SCATTER after weight_grad of layer 0, each micro-batch",
      "FREE after forward of layer 1, each micro-batch",
      "FREE after backward of layer 0, each micro-batch",
    ]);
    // The root keeps its weights from the first forward to the last backward, as FairScale's root does.
    expect(unitLines(plan, 4)).toEqual([
      "ALL_GATHER before forward of layer 5, the first micro-batch",
      "REDUCE_SCATTER after weight_grad of layer 5, each micro-batch",
      "FREE after backward of layer 5, the last micro-batch",
    ]);
  });

  it("reshard_after_forward = false: gathers in forward only, once per step", () => {
    const plan = samplePlan("mlp", "fsdp", 4, { fsdpMinParams: 4000, reshardAfterForward: false });
    for (const u of plan.units) {
      const gathers = plan.collectives.filter((c) => c.kind === "ALL_GATHER" && c.unit === u.index);
      expect(gathers.map((c) => formatPoint(c.at))).toEqual([`before forward of layer ${u.layers[0]}, the first micro-batch`]);
    }
    expect(plan.collectives.filter((c) => c.at.phase === "backward")).toEqual([]);
  });

  it("llama-7b with reshard: 32 inner units × 2 gathers + the root's 1, and 33 reduce-scatters", () => {
    const plan = samplePlan("llama-7b", "fsdp", 8);
    const count = (k: string) => plan.collectives.filter((c) => c.kind === k).length;
    expect([count("ALL_GATHER"), count("REDUCE_SCATTER")]).toEqual([65, 33]);
    expect(plan.frees).toHaveLength(65);
  });
});
