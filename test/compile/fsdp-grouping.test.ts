// Compile's side of hybrid sharding and no_sync: the settings reach the plan, a no_sync unit's gradient buffer
// lives from the step's first backward to its one reduce-scatter (priced in the memory plan), a hybrid
// group's all-reduce follows the reduce-scatter it sums on the comm stream, and settings that cannot be
// planned are refused with their reason.
import { describe, expect, it } from "vitest";
import { compileSample } from "./helpers.js";

const BASE = { stages: 1, shard: "fsdp", chunks: 4, schedule: "1f1b", checkpoint: "never", fsdp_min_params: 5000 };

describe("FSDP shard groups and no_sync in compiled plans", () => {
  it("no_sync: each unit's gradient is one buffer from the first backward to the last micro-batch's reduce-scatter", () => {
    const c = compileSample("gpt-tiny", "cpu", { ...BASE, data_parallel: 2, no_sync: true }, 2);
    expect(c.plan.settings.noSync).toBe(true);
    const prog = c.programs[0]!;
    const firstBackward = prog.actions.findIndex((a) => a.action.kind === "B");
    const grads = c.memory[0]!.buffers.filter((b) => b.kind === "grad" && /unit \d+ gradient/.test(b.name));
    expect(grads.length).toBe(c.shards[0]!.units.length);
    for (const b of grads) {
      expect(b.from).toBe(firstBackward);
      const to = prog.actions[b.to]!.action;
      expect(to.kind).toBe("REDUCE_SCATTER");
      expect(to.mb).toBeUndefined();
    }
    // Held across the micro-batches, so the step holds more than with a reduce-scatter per micro-batch.
    const each = compileSample("gpt-tiny", "cpu", { ...BASE, data_parallel: 2, no_sync: false }, 2);
    expect(Math.max(...c.plan.predicted.peakMemoryBytes)).toBeGreaterThan(Math.max(...each.plan.predicted.peakMemoryBytes));
    expect(prog.actions.filter((a) => a.action.kind === "REDUCE_SCATTER")).toHaveLength(c.shards[0]!.units.length);
  });

  it("hybrid: every unit's all-reduce comes after its reduce-scatter on the comm stream", () => {
    const c = compileSample("gpt-tiny", "cpu", { ...BASE, stages: 2, data_parallel: 4, shard_group: 2, chunks: 2 }, 8);
    expect(c.plan.settings.shardGroup).toBe(2);
    c.plan.programs.forEach((prog) => {
      const texts = prog.streams.comm.map((id) => prog.actions[id]!);
      for (const [i, a] of texts.entries()) {
        if (a.collective?.of !== "unit" || !a.text.includes("ALL_REDUCE")) continue;
        const unit = a.text.slice(a.text.indexOf("u"));
        const stage = a.text.slice(0, a.text.indexOf("ALL_REDUCE"));
        const reduced = texts.slice(0, i).filter((x) => x.text.startsWith(`${stage}REDUCE_SCATTER`) && x.text.endsWith(unit));
        expect(reduced.length, `${a.text} on program ${prog.id}`).toBeGreaterThan(0);
      }
    });
    expect(c.plan.programs.some((p) => p.actions.some((a) => a.collective?.of === "unit" && a.text.includes("ALL_REDUCE")))).toBe(true);
  });

  it("refuses a shard group of one and one that does not divide the replicas", () => {
    expect(() => compileSample("gpt-tiny", "cpu", { ...BASE, data_parallel: 4, chunks: 2, shard_group: 1 }, 4)).toThrow(/shard_group = 1 shards nothing/);
    expect(() => compileSample("gpt-tiny", "cpu", { ...BASE, data_parallel: 4, chunks: 2, shard_group: 3 }, 4)).toThrow(/shard_group = 3 does not divide data_parallel = 4/);
  });
});
