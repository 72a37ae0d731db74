// lower(plan, graph, ranks): the device programs of any subset of ranks are exactly the ones the whole world's
// lowering gives those ranks (a process lowers only its own), per-device tables are indexed by local position
// while records name global ranks, and parameters are readable only where the subset holds them whole.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { lower } from "../../src/lower/lower.js";
import { slotElements, statePieces } from "../../src/lower/param-pieces.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { samplePath, sets } from "../compile/helpers.js";

function planFor(overrides: Record<string, string | number>, devices: number) {
  const model = checkFile(samplePath("gpt-tiny"), { overrides: sets(overrides) }).model!;
  const plan = compileModel(model, { cluster: "cpu", devices, source: "gpt-tiny", fsmVersion: "test" }).plan;
  return { plan, graph: graphFromJson(plan.model.name, plan.graph) };
}

describe("lower(plan, graph, ranks)", () => {
  const { plan, graph } = planFor({ stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2, checkpoint: "never" }, 4);
  const all = lower(plan, graph);

  it("lowers every rank by default, in rank order", () => {
    expect(all.ranks).toEqual([0, 1, 2, 3]);
    expect(all.devices).toHaveLength(4);
  });

  it("a subset of ranks gets exactly the whole world's programs for them", () => {
    const some = lower(plan, graph, [1, 3]);
    expect(some.ranks).toEqual([1, 3]);
    expect(some.devices).toEqual([all.devices[1], all.devices[3]]);
    expect(some.inputs).toEqual([all.inputs[1], all.inputs[3]]);
    expect(some.optimizerState).toEqual([all.optimizerState[1], all.optimizerState[3]]);
    // Records keep global ranks.
    expect(new Set(some.paramPieces.map((p) => p.device))).toEqual(new Set([1, 3]));
    expect(some.paramPieces).toEqual(all.paramPieces.filter((p) => p.device === 1 || p.device === 3));
    expect(some.lossSlots).toEqual(all.lossSlots.filter((l) => l.device === 1 || l.device === 3));
    // Per-device lookups by global rank go through the local index.
    const slot = some.paramPieces.find((p) => p.device === 3)!.slot;
    expect(slotElements(some, 3, slot)).toBe(slotElements(all, 3, slot));
    expect(statePieces(some, 3)).toEqual(statePieces(all, 3));
    expect(() => slotElements(some, 0, slot)).toThrow(/rank 0 is not one of this process's ranks \[1, 3\]/);
  });

  it("parameters are readable only where the subset holds them whole", () => {
    // Ranks 0 and 1 are stage 0's two FSDP replicas: together they hold stage 0's parameters whole.
    const stage0 = lower(plan, graph, plan.stages[0]!.ranks);
    const held = new Set(plan.shard[0]!.units.flatMap((u) => u.params.map(([n]) => n)));
    expect(held.size).toBeGreaterThan(0);
    for (const name of held) expect(stage0.paramReaders.has(name), name).toBe(true);
    // One FSDP shard alone holds no parameter whole (every unit is split over both replicas).
    const one = lower(plan, graph, [plan.stages[0]!.ranks[0]!]);
    const whole = [...held].filter((n) => one.paramReaders.has(n));
    for (const n of whole) expect(one.paramPieces.filter((p) => p.param === n && p.dtype === "f32").reduce((a, p) => a + p.count, 0)).toBe(graph.param(n)!.type.shape.reduce((a, d) => a * Number(d), 1));
    expect(whole.length).toBeLessThan(held.size);
  });

  it("refuses ranks that are not ascending ranks of the plan", () => {
    for (const ranks of [[], [3, 1], [1, 1], [4], [-1], [0.5]]) expect(() => lower(plan, graph, ranks), JSON.stringify(ranks)).toThrow(/ascending distinct ranks of the plan's 4 devices/);
  });
});
