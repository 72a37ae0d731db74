// The ViewModel against numbers checked by hand on small plans: the bubbles between compute blocks, memory
// curves that peak where the memory plan says, stage rows that add up to the model, collapsed repeats.
import { describe, expect, it } from "vitest";
import { actionFromText } from "../../src/schedule/action.js";
import { rankText } from "../../src/viz/format.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import type { ViewModel } from "../../src/viz/view-types.js";
import { caseById, CASES, planFor } from "./helpers.js";

const idleSeconds = (vm: ViewModel) => vm.predicted.rows.reduce((n, r) => n + r.lanes[0].idle.reduce((m, g) => m + g.end - g.start, 0), 0);

describe("view model", () => {
  it("mlp 2 stages × 2 replicas, 2 micro-batches: the bubbles of pipeline rank 0 are the gaps between its actions", () => {
    const plan = planFor(caseById("mlp"));
    const vm = buildViewModel(plan);
    // Program 0 runs 0F0, 0F1, then waits for 0B0's gradient, runs 0B0, waits, 0B1, waits for the
    // all-reduce, runs the optimizer, and idles until the last stage's optimizer ends the step.
    const acts = plan.programs[0]!.actions;
    const at = (text: string) => acts.find((a) => a.text === text)!;
    const row = vm.predicted.rows[0]!;
    expect(row.label).toBe("ranks 0-1");
    expect(row.lanes[0].blocks.map((b) => b.label)).toEqual(["F0", "F1", "B0", "B1", "opt"]);
    expect(row.lanes[0].idle).toEqual([
      { start: at("0F1").end, end: at("0B0").start },
      { start: at("0B0").end, end: at("0B1").start },
      { start: at("0B1").end, end: at("0OPTIMIZER").start },
      { start: at("0OPTIMIZER").end, end: plan.predicted.stepTimeSeconds },
    ]);
    // Without gated layers the compute actions run without pauses inside, so the gaps are all the idle time.
    expect(idleSeconds(vm) / (vm.predicted.rows.length * vm.predicted.stepSeconds)).toBeCloseTo(plan.predicted.bubbleFraction, 12);
    expect(row.lanes[1].blocks.map((b) => `${b.kind}:${b.label}`)).toEqual(["send:send F0", "send:send F1", "recv:recv B0", "recv:recv B1", "collective:AR u0"]);
  });

  it("memory curves peak at the memory plan's peak and start and end empty", () => {
    for (const c of CASES) {
      const plan = planFor(c);
      const vm = buildViewModel(plan);
      for (const m of vm.memory) {
        expect(m.maxBytes, `${c.id} program ${m.program}`).toBe(plan.memory[m.program]!.peakBytes);
        expect(m.points[0]![0]).toBe(0);
        expect(m.points[m.points.length - 1]![1]).toBe(0);
        expect(m.capacityBytes).toBe(plan.cluster.memoryBytes);
        for (let i = 1; i < m.points.length; i++) expect(m.points[i]![0]).toBeGreaterThan(m.points[i - 1]![0]);
      }
    }
  });

  it("stage rows add up to the model: parameters, and FLOPs per device × replicas = FLOPs per step", () => {
    for (const c of CASES) {
      const plan = planFor(c);
      const vm = buildViewModel(plan);
      expect(vm.stages.reduce((n, s) => n + s.parameters, 0), c.id).toBe(plan.model.parameters);
      const flops = vm.stages.reduce((n, s) => n + s.flopsPerDevice * s.ranks.length, 0);
      expect(flops / plan.predicted.flopsPerStep, c.id).toBeCloseTo(1, 9);
      expect(vm.layerGroups.reduce((n, g) => n + g.parameters, 0)).toBe(plan.model.parameters);
      // Compute time per stage is the busy time of its program (one stage per program here) ≤ the step.
      vm.stages.forEach((s) => expect(s.computeSeconds).toBeLessThanOrEqual(plan.predicted.stepTimeSeconds));
      // ... and exactly the durations of the stage's actions on its program's compute stream.
      for (const s of vm.stages) {
        const program = plan.programs.find((p) => p.stages.includes(s.stage))!;
        const busy = program.streams.compute.map((id) => program.actions[id]!).filter((a) => actionFromText(a.text).stage === s.stage);
        expect(busy.length, `${c.id} stage ${s.stage}`).toBeGreaterThan(0);
        expect(s.computeSeconds, `${c.id} stage ${s.stage}`).toBeCloseTo(busy.reduce((n, a) => n + a.end - a.start, 0), 15);
      }
      // With gated layers (FSDP) an action may pause inside, so gaps can only miss idle time, never invent it.
      expect(idleSeconds(vm) / (vm.predicted.rows.length * vm.predicted.stepSeconds)).toBeLessThanOrEqual(plan.predicted.bubbleFraction + 1e-12);
    }
  });

  it("collapses consecutive repeated blocks of one stage, never across stages", () => {
    const vm = buildViewModel(planFor(caseById("gpt2-124m")));
    const labels = vm.layerGroups.map((g) => `${g.stage}:${g.label}`);
    // gpt2: wte, wpe, 12 blocks, ln_f, lm_head over 2 stages; each stage's run of blocks is one box.
    expect(labels.filter((l) => l.includes("blocks"))).toHaveLength(2);
    for (const g of vm.layerGroups) {
      expect(g.names).toHaveLength(g.last - g.first + 1);
      if (g.names.length > 1) expect(g.label).toBe(`${g.names[0]} .. ${g.names[g.names.length - 1]} (${g.names.length} blocks)`);
    }
    expect(vm.layerGroups.find((g) => g.label === "lm_head")!.tied).toEqual(["lm_head.weight = wte.weight"]);
    // The forward flow crosses from stage 0 to stage 1 exactly once.
    expect(vm.edges.filter((e) => e.crossStage)).toHaveLength(1);
  });

  it("the shard map: fsdp slices cover each unit once; oss owners cover each parameter once", () => {
    const fsdp = buildViewModel(planFor(caseById("gpt-tiny")));
    for (const g of fsdp.shards) {
      expect(g.strategy).toBe("fsdp");
      expect(g.members.map((m) => m.rank)).toEqual(g.ranks);
      expect(g.members.every((m) => m.owns.length > 0 && m.owns.every((o) => o.startsWith("unit ")))).toBe(true);
    }
    const plan = planFor(caseById("gpt2-124m"));
    const oss = buildViewModel(plan);
    for (const g of oss.shards) {
      const owned = g.members.flatMap((m) => m.owns).sort();
      expect(owned).toEqual(Object.keys(plan.shard[g.stage]!.owners).sort());
    }
  });

  it("aggregates data-parallel replicas into one row per program, and the alternatives of a searched plan", () => {
    const plan = planFor(caseById("gpt2-124m"));
    const vm = buildViewModel(plan);
    expect(vm.predicted.rows.map((r) => r.label)).toEqual(["ranks 0-7", "ranks 8-15"]);
    expect(vm.alternatives?.candidates.filter((c) => c.status === "chosen")).toHaveLength(1);
    expect(vm.summary.peakMemoryBytes).toBe(Math.max(...plan.predicted.peakMemoryBytes));
  });

  it("rank ranges", () => {
    expect(rankText([0, 1, 2, 3])).toBe("0-3");
    expect(rankText([5])).toBe("5");
    expect(rankText([0, 1, 4, 8, 9, 10])).toBe("0-1, 4, 8-10");
    expect(rankText([])).toBe("");
  });

  it("is deterministic: the same plan gives an equal view model", () => {
    const plan = planFor(caseById("gpt-tiny"));
    expect(JSON.stringify(buildViewModel(plan))).toBe(JSON.stringify(buildViewModel(plan)));
  });
});
