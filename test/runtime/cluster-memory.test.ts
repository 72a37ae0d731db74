// Each device's arena (what the native engine allocates and touches once) against the plan's predicted peak
// for that device: the runtime must stay close to the memory plan the compiler priced (bench:cluster
// reports every device). First the fullest device of data-parallel and sharded plans; then pipelines, where
// each stage's forward working set, the values a recompute rebuilds, and the sends and reduce-scatters that
// free bytes (which the runtime is told of by the plan's release dependencies) are priced as the runtime
// holds them. Then FSDP with per-layer checkpointing: the most bytes the runtime's layout holds at once
// against the plan's predicted peak, within 5% (a unit's gradient buffer reused micro-batch to micro-batch and
// each all-gather issued where the plan issues it, in both).
import { describe, expect, it } from "vitest";
import { checkFile, type CheckResult } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { lower } from "../../src/lower/lower.js";
import type { Plan } from "../../src/plan/plan.js";
import { programOfRank } from "../../src/plan/listing.js";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { samplePath, sets } from "../compile/helpers.js";
import { checkSources } from "../check/helpers.js";

/** The memory plan's arena for a device: the model these tests hold the runtime to (the plan itself predicts
 *  the runtime's laid-out arenas, which are the runtime's by construction). */
function memoryPlanArena(plan: Plan, rank: number): number {
  return plan.memory[programOfRank(plan, rank)!.program.id]!.arenaBytes;
}

const CASES: ["mlp" | "gpt-tiny", Record<string, string | number>, number][] = [
  ["gpt-tiny", { stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1],
  ["gpt-tiny", { stages: 1, data_parallel: 4, chunks: 2, shard: "none" }, 4],
  ["gpt-tiny", { stages: 1, data_parallel: 4, chunks: 2, shard: "sddp" }, 4],
  ["gpt-tiny", { stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp" }, 4],
  ["gpt-tiny", { stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp", "train.batch": 64 }, 4],
  ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4],
  ["mlp", { stages: 2, data_parallel: 2, chunks: 2, shard: "sddp" }, 4],
  ["mlp", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4],
];

describe("the native arenas follow the plan's memory prediction", () => {
  for (const [name, o, devices] of CASES) {
    it(`${name} ${JSON.stringify(o)}: the fullest device's arena is within 10% of its predicted peak`, () => {
      const model = checkFile(samplePath(name), { overrides: sets({ ...o, checkpoint: "never" }) }).model!;
      const plan = compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
      const program = lower(plan, graphFromJson(plan.model.name, plan.graph));
      const arenas = program.devices.map((d) => d.arenaBytes);
      const fullest = arenas.indexOf(Math.max(...arenas));
      const predicted = memoryPlanArena(plan, fullest);
      expect(arenas[fullest]! / predicted, `device ${fullest}: ${arenas[fullest]} B vs ${predicted} B predicted`).toBeLessThanOrEqual(1.1);
      // Live bytes never exceed the arena (the layout's own consistency).
      for (const d of program.devices) expect(d.liveBytes).toBeLessThanOrEqual(d.arenaBytes);
    });
  }
});

// Replicated and OSS gradients are views into their all-reduce bucket, which exists from the first write of
// any of its parameters: with one micro-batch (the peak at the backward's start, before most gradients are
// written) the plan priced them parameter by parameter and the runtime held 1.16-1.20x its peak.
describe("data parallel with replicated or OSS gradients: the live peak is the plan's", () => {
  for (const shard of ["none", "oss"]) {
    for (const chunks of [1, 2]) {
      it(`gpt-tiny, ${shard}, 2 replicas, ${chunks} micro-batch${chunks > 1 ? "es" : ""}: within 5%`, () => {
        const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 1, data_parallel: 2, chunks, shard, checkpoint: "never" }) }).model!;
        const plan = compileModel(model, { cluster: "cpu", devices: 2, source: "gpt-tiny", fsmVersion: "test" }).plan;
        const d = lower(plan, graphFromJson(plan.model.name, plan.graph), [0]).devices[0]!;
        const peak = plan.memory[0]!.peakBytes;
        expect(Math.abs(d.liveBytes / peak - 1), `live ${d.liveBytes} B vs ${peak} B planned`).toBeLessThanOrEqual(0.05);
      });
    }
  }
});

// Pipelines, by device: the live bytes of the runtime's layout against its program's planned peak. Stages of
// some 100 KiB or more are within 5%; gpt-tiny's embedding-only first stage (some 40 KiB, compute far shorter
// than its transfers) is checked only never to exceed the plan by more than 12%: the runtime's timing-free
// windows hold a transfer's bytes from the compute it follows to the compute that waits for it, where the
// plan's predicted run overlaps them with less. Before: 1.86× (4 stages, 1F1B), 1.28× (the same with
// checkpoint always), 1.12× (2 stages × FSDP × 4 micro-batches), and the one-layer last stage of 4 was
// 0.92× (its sent input gradient priced from the start of the layer's backward, not from the op making it);
// GPipe on 2 stages was 0.90× (the stage's gradients priced whole from the first backward's start, where
// the runtime makes each accumulator at its first weight-gradient op, layer by layer).
describe("pipelines: each device's live peak is what the plan predicts", () => {
  const cases: ["mlp" | "gpt-tiny", Record<string, string | number>, number][] = [
    ["gpt-tiny", { stages: 4, data_parallel: 1, chunks: 4, shard: "none", schedule: "1f1b", "train.batch": 16, checkpoint: "never" }, 4],
    ["gpt-tiny", { stages: 4, data_parallel: 1, chunks: 4, shard: "none", schedule: "1f1b", "train.batch": 16, checkpoint: "always" }, 4],
    ["gpt-tiny", { stages: 2, data_parallel: 1, chunks: 4, shard: "none", schedule: "1f1b", checkpoint: "always" }, 2],
    ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 4, shard: "oss", schedule: "gpipe", checkpoint: "except_last" }, 4],
    ["gpt-tiny", { stages: 2, data_parallel: 1, chunks: 4, shard: "none", schedule: "gpipe", checkpoint: "never" }, 2],
    ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", schedule: "1f1b", checkpoint: "never" }, 4],
    ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", schedule: "1f1b", checkpoint: "always" }, 4],
    ["mlp", { stages: 2, data_parallel: 1, chunks: 4, shard: "none", schedule: "1f1b", checkpoint: "always" }, 2],
    ["mlp", { stages: 2, data_parallel: 1, chunks: 4, shard: "none", schedule: "1f1b", checkpoint: "never" }, 2],
  ];
  for (const [name, o, devices] of cases) {
    it(`${name} ${JSON.stringify(o)}: every device within 5% of its plan (a small first stage: at most 12% above)`, () => {
      const model = checkFile(samplePath(name), { overrides: sets(o) }).model!;
      const plan = compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
      const program = lower(plan, graphFromJson(plan.model.name, plan.graph));
      for (const [i, d] of program.devices.entries()) {
        const planned = plan.memory.find((m) => plan.programs[m.program]!.ranks.includes(program.ranks[i]!))!.peakBytes;
        const ratio = d.liveBytes / planned;
        const why = `device ${i}: runtime ${d.liveBytes} B, plan ${planned} B`;
        if (planned < 64 * 1024) expect(ratio, why).toBeLessThanOrEqual(1.12);
        else expect(Math.abs(ratio - 1), why).toBeLessThanOrEqual(0.05);
      }
    });
  }
});

// Mixed precision as the CPU runtime runs it: fp32 gradients (train.reduce_dtype's default) and every 16-bit
// operand widened to f32 while its op runs, which the plan prices for CPU clusters. Before, bf16/fp16 arenas
// were up to 1.39× the plan (gpt-tiny FSDP) because it priced 2-byte gradients and no widened copies.
describe("mixed precision: each device's arena is what the plan predicts", () => {
  const models: [string, string][] = [
    ["gpt-tiny", samplePath("gpt-tiny")],
    ["the tiny Llama", resolve(import.meta.dirname, "../fixtures/models/llama-tiny.fsm")],
  ];
  for (const [name, path] of models) {
    for (const precision of ["bf16", "fp16"]) {
      for (const shard of ["none", "fsdp"]) {
        it(`${name}, ${precision}, ${shard}, 1 stage × 4: every arena within 5% of its device's predicted peak`, () => {
          const model = checkFile(path, { overrides: sets({ stages: 1, data_parallel: 4, chunks: 2, shard, checkpoint: "never", "train.precision": precision }) }).model!;
          const plan = compileModel(model, { cluster: "cpu", devices: 4, source: name, fsmVersion: "test" }).plan;
          const program = lower(plan, graphFromJson(plan.model.name, plan.graph));
          for (const [i, d] of program.devices.entries()) {
            const predicted = memoryPlanArena(plan, program.ranks[i]!);
            expect(Math.abs(d.arenaBytes / predicted - 1), `device ${i}: ${d.arenaBytes} B vs ${predicted} B predicted`).toBeLessThanOrEqual(0.05);
          }
        });
      }
    }
  }
  it("gpt2-124m in bf16, as compile plans it for 4 CPU devices: arena within 5% of the plan, live peak within [-10%, +5%]", () => {
    const model = checkFile(samplePath("gpt2-124m")).model!;
    const plan = compileModel(model, { cluster: "cpu", devices: 4, source: "gpt2-124m", fsmVersion: "test" }).plan;
    expect(plan.settings.precision).toBe("bf16");
    const d = lower(plan, graphFromJson(plan.model.name, plan.graph), [0]).devices[0]!;
    const predicted = memoryPlanArena(plan, 0);
    // Before: the runtime's live peak was 1.39× the plan's (6.0 GiB against 4.3). Now 0.94×: the plan
    // holds the tied embedding's unit twice while the next forward's prefetch overlaps this backward, where
    // the runtime's backward reads the newer copy and lets the older go.
    expect(d.liveBytes / predicted, `live ${d.liveBytes} B vs ${predicted} B predicted`).toBeLessThanOrEqual(1.05);
    expect(d.liveBytes / predicted, `live ${d.liveBytes} B vs ${predicted} B predicted`).toBeGreaterThanOrEqual(0.9);
    expect(Math.abs(d.arenaBytes / predicted - 1), `arena ${d.arenaBytes} B vs ${predicted} B predicted`).toBeLessThanOrEqual(0.05);
  });
});

/** A model's source with annotations put on its repeated layers (`@checkpoint`, `@fsdp_unit`). */
type Model = NonNullable<CheckResult["model"]>;

function annotated(path: string, annotations: string): (o: Record<string, string | number>) => Model {
  return (o) => {
    const src = readFileSync(path, "utf8").replace("  layers = repeat", `  ${annotations}\n  layers = repeat`);
    const lib = resolve(dirname(path), src.match(/import "([^"]+)"/)![1]!);
    return checkSources({ [path]: src, [lib]: readFileSync(lib, "utf8") }, path, { overrides: sets({ ...o, checkpoint: "never" }) }).model!;
  };
}

const LLAMA = resolve(import.meta.dirname, "../fixtures/models/llama-tiny.fsm");

/** Per device: the most bytes live at once as the runtime lays it out, and as the plan predicts for it. */
function devicePeaks(model: Model): { runtime: number; plan: number }[] {
  const plan = compileModel(model, { cluster: "cpu", devices: 4, source: "test", fsmVersion: "test" }).plan;
  const program = lower(plan, graphFromJson(plan.model.name, plan.graph));
  return program.devices.map((d, i) => ({ runtime: d.liveBytes, plan: plan.memory.find((m) => plan.programs[m.program]!.ranks.includes(program.ranks[i]!))!.peakBytes }));
}

/** Device 0's. */
const livePeaks = (model: Model): { runtime: number; plan: number } => devicePeaks(model)[0]!;

describe("FSDP with per-layer checkpointing: the runtime holds what the plan says", () => {
  const fsdp = { stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp" };
  const cases: [string, string, string][] = [
    ["gpt-tiny", samplePath("gpt-tiny"), "@checkpoint"],
    ["gpt-tiny, a unit per block", samplePath("gpt-tiny"), "@checkpoint @fsdp_unit"],
    ["the tiny Llama", LLAMA, "@checkpoint"],
    ["the tiny Llama, a unit per block", LLAMA, "@checkpoint @fsdp_unit"],
  ];
  for (const [name, path, ann] of cases) {
    it(`${name} (${ann}) on 4 devices: the runtime's live peak within 5% of the plan's`, () => {
      const { runtime, plan } = livePeaks(annotated(path, ann)(fsdp));
      expect(Math.abs(runtime / plan - 1), `runtime ${runtime} B, plan ${plan} B`).toBeLessThanOrEqual(0.05);
    });
  }
  // Two pipeline stages × 2 replicas: a backward's first unit is gathered when the backward can begin (not
  // held through the wait for the next stage's gradient), in the plan and the runtime alike. Pipelines'
  // collectives have wide windows in the runtime's timing-free layout and narrow ones in the plan's
  // predicted run, so the plan may promise up to 10% more than the runtime lays out (gpt-tiny with
  // @checkpoint: 0.92×, since the runtime waits for each freeing collective); never 5% less.
  for (const [name, path] of [["gpt-tiny", samplePath("gpt-tiny")], ["the tiny Llama", LLAMA]] as const) {
    for (const ann of ["@checkpoint @fsdp_unit", "@checkpoint", ""]) {
      it(`${name} (${ann || "no annotation"}), 2 stages × 2 replicas: every device's live peak within [-10%, +5%] of its plan's`, () => {
        const peaks = devicePeaks(annotated(path, ann)({ stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }));
        for (const [d, { runtime, plan }] of peaks.entries()) {
          // gpt-tiny's embedding-only first stage: its backward reads no weight, so the runtime drops the
          // gathered table early (8 KiB of 44); the plan keeps a unit until its backward ends.
          if (plan < 64 * 1024) continue;
          expect(runtime / plan, `device ${d}: runtime ${runtime} B, plan ${plan} B`).toBeLessThanOrEqual(1.05);
          expect(runtime / plan, `device ${d}: runtime ${runtime} B, plan ${plan} B`).toBeGreaterThanOrEqual(0.9);
        }
      });
    }
  }
  for (const [name, path] of [["gpt-tiny", samplePath("gpt-tiny")], ["the tiny Llama", LLAMA]] as const) {
    it(`${name}: checkpointing every layer lowers the runtime's live peak, and the plan's`, () => {
      const without = livePeaks(annotated(path, "")(fsdp));
      const withIt = livePeaks(annotated(path, "@checkpoint")(fsdp));
      expect(withIt.runtime).toBeLessThan(without.runtime);
      expect(withIt.plan).toBeLessThan(without.plan);
    });
  }
});
