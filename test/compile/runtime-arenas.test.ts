// Step 11 of compile: the plan carries the arenas `fsm run` allocates. For every strategy and a pipeline, each
// device's recorded arena is what lowering the written plan (as `fsm run` does, from the plan's JSON graph)
// gives that device — replicas compile did not lower included — and is what the plan predicts; the runtime
// refuses a plan whose record its lowering does not reproduce; plans over the default's budget, or with
// `--arenas never`, say why they carry none.
import { describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layOutArenas, opsRun } from "../../src/compile/runtime-arenas.js";
import { lower } from "../../src/lower/lower.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { parsePlan } from "../../src/verify/load.js";
import { planToJson, writePlan } from "../../src/plan/serialize.js";
import { runCli } from "../support/cli.js";
import { compileSample } from "./helpers.js";

const CASES: Record<string, string | number>[] = [
  { stages: 1, data_parallel: 4, chunks: 2, shard: "none" },
  { stages: 1, data_parallel: 4, chunks: 2, shard: "oss" },
  { stages: 1, data_parallel: 4, chunks: 2, shard: "sddp" },
  { stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp" },
  { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", schedule: "1f1b", checkpoint: "always" },
  { stages: 4, data_parallel: 1, chunks: 4, shard: "none", schedule: "gpipe", "train.batch": 16 },
];

describe("the plan's arenas are the ones fsm run lays out", () => {
  for (const o of CASES) {
    it(`gpt-tiny ${JSON.stringify(o)}: every device's recorded arena is its lowered arena and its predicted memory`, () => {
      const c = compileSample("gpt-tiny", "cpu", { checkpoint: "never", ...o });
      expect(c.arenasSkipped).toBeUndefined();
      const plan = c.plan;
      const lowered = lower(plan, graphFromJson(plan.model.name, plan.graph));
      plan.programs.forEach((p, i) => {
        const runtime = plan.memory[i]!.runtime!;
        p.ranks.forEach((rank, r) => {
          const d = lowered.devices[lowered.ranks.indexOf(rank)]!;
          expect(runtime.arenaBytes[r], `device ${rank}`).toBe(d.arenaBytes);
          expect(runtime.liveBytes[r], `device ${rank}`).toBe(d.liveBytes);
          expect(plan.predicted.peakMemoryBytes[rank]).toBe(d.arenaBytes);
        });
      });
    });
  }

  it("oss replicas own different optimizer state, so their arenas are laid out one by one and differ", () => {
    const plan = compileSample("gpt-tiny", "cpu", { stages: 1, data_parallel: 4, chunks: 2, shard: "oss", checkpoint: "never" }).plan;
    expect(new Set(plan.memory[0]!.runtime!.arenaBytes).size).toBeGreaterThan(1);
  });

  it("the written plan keeps them: it loads with the same record", () => {
    const plan = compileSample("mlp", "cpu", { stages: 2, data_parallel: 1, chunks: 2 }).plan;
    const loaded = parsePlan(planToJson(plan));
    expect(loaded.memory.map((m) => m.runtime)).toEqual(plan.memory.map((m) => m.runtime));
  });
});

describe("plans that carry no lowered arenas say why", () => {
  const base = () => compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" });

  it("--arenas never: the plan predicts its memory plan's arenas", () => {
    const c = base();
    const laid = layOutArenas({ ...c.plan, memory: c.plan.memory.map(({ runtime: _, ...m }) => m) }, c.training, "never", c.cluster.profile);
    expect(laid.skipped).toBe("--arenas never");
    expect(laid.plan.memory.every((m) => m.runtime === undefined)).toBe(true);
  });

  it("over the budget by its slots, counted while lowering; far over it by its ops, not tried", () => {
    const c = base();
    const bare: Plan = { ...c.plan, memory: c.plan.memory.map(({ runtime: _, ...m }) => m) };
    const ops = opsRun(bare, c.training);
    // Between the ops gate and the slots it makes: lowered, then stopped.
    const bySlots = layOutArenas(bare, c.training, "auto", c.cluster.profile, Math.ceil(0.75 * ops));
    expect(bySlots.skipped).toMatch(/^more than [\d.]+k slots to lay out; the default's budget is [\d.]+k slots; --arenas always lays them out$/);
    const byOps = layOutArenas(bare, c.training, "auto", c.cluster.profile, Math.floor(0.5 * ops));
    expect(byOps.skipped).toMatch(/k ops to lower; the default's budget/);
    // "always" ignores the budget.
    const always = layOutArenas(bare, c.training, "always", c.cluster.profile, 1);
    expect(always.skipped).toBeUndefined();
    expect(always.plan.memory.map((m) => m.runtime)).toEqual(c.plan.memory.map((m) => m.runtime));
  });

  it("a 16-bit plan for GPUs is laid out as the CUDA device runs it (16-bit operands read directly), not as the CPU does", () => {
    const c = compileSample("gpt-tiny", "h100-sxm", { stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp", checkpoint: "never", "train.precision": "bf16" });
    expect(c.arenasSkipped).toBeUndefined();
    const g = graphFromJson(c.plan.model.name, c.plan.graph);
    const gpu = lower(c.plan, g, undefined, undefined, { kernels16: true });
    const cpu = lower(c.plan, g);
    c.plan.programs.forEach((p) => p.ranks.forEach((rank, r) => expect(c.plan.memory[p.id]!.runtime!.arenaBytes[r]).toBe(gpu.devices[rank]!.arenaBytes)));
    // The CPU's widened f32 copies of every 16-bit operand and result cost it more than the GPU's layout.
    gpu.devices.forEach((d, i) => expect(d.arenaBytes).toBeLessThan(cpu.devices[i]!.arenaBytes));
    // No 16-bit kernel operand is widened on the GPU: its only casts narrow an f32 model input for a product.
    const casts = gpu.devices[0]!.instructions.filter((ins) => ins.op === "fsm_cast");
    for (const ins of casts) expect(gpu.devices[0]!.slots[ins.inputs[0]!]!.dtype).toBe("f32");
  });

  it("a plan the runtime refuses (gradients reduced in bf16) is not laid out as if it ran", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp", checkpoint: "never", "train.precision": "bf16", "train.reduce_dtype": "bf16" });
    expect(c.arenasSkipped).toBe("fsm run cannot run this plan yet: it reduces gradients in bf16 (train.reduce_dtype), the runtime in fp32");
  });

  it("the plan loader refuses a record that is not one entry per replica", () => {
    const plan = base().plan;
    const bad = { ...plan, memory: plan.memory.map((m, i) => (i === 0 ? { ...m, runtime: { arenaBytes: [1], liveBytes: [1] } } : m)) };
    expect(() => parsePlan(planToJson(bad))).toThrow(/memory\[0\]\.runtime\.arenaBytes: expected one entry per replica of the program \(2\), got 1/);
  });
});

describe("fsm run holds the plan to its record", () => {
  it("refuses a plan whose recorded arena its lowering does not reproduce, naming the device", async () => {
    const plan = compileSample("mlp", "cpu", { stages: 1, data_parallel: 2, chunks: 1 }).plan;
    const m = plan.memory[0]!;
    const edited = { ...plan, memory: [{ ...m, runtime: { ...m.runtime!, arenaBytes: m.runtime!.arenaBytes.map((b, r) => (r === 1 ? b + 64 : b)) } }] };
    const dir = mkdtempSync(join(tmpdir(), "fsm-arenas-"));
    try {
      const path = join(dir, "mlp.plan.json");
      writePlan(path, edited);
      const r = await runCli("run", path, "--steps", "1");
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`the plan records an arena of ${m.runtime!.arenaBytes[1]! + 64} bytes for device ${plan.programs[0]!.ranks[1]}`);
      expect(r.stderr).not.toMatch(/at .*\.ts:\d+/);
      // The same plan as compiled runs.
      writePlan(path, plan);
      expect((await runCli("run", path, "--steps", "1")).code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
