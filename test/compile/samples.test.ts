// Every sample compiles into a valid, simulated plan that fits on at least three cluster shapes, from 4 CPU
// devices to 1024 GPUs; plan invariants hold on each (valid on load, every action run, memory within device).
import { describe, expect, it } from "vitest";
import type { Compiled } from "../../src/compile/compile.js";
import { runPrograms } from "../../src/compile/engine.js";
import { parsePlan } from "../../src/verify/load.js";
import { planToJson } from "../../src/plan/serialize.js";
import { compileSample, type SampleName } from "./helpers.js";

type Shape = readonly [cluster: string, overrides: Readonly<Record<string, string | number | boolean>>];

// Settings that fit each sample on each shape (model state and activations within device memory).
const SHAPES: Readonly<Record<SampleName, readonly Shape[]>> = {
  mlp: [
    ["cpu", { stages: 2, data_parallel: 2, chunks: 4 }],
    ["h100-sxm", { stages: 2, data_parallel: 32, chunks: 1, shard: "sddp" }],
    ["h200", { stages: 4, data_parallel: 256, chunks: 1, shard: "oss", "train.batch": 1024 }],
  ],
  "gpt-tiny": [
    ["cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }],
    ["h100-sxm", { stages: 2, data_parallel: 32, chunks: 2, shard: "oss", "train.batch": 128 }],
    ["h200", { stages: 4, data_parallel: 256, chunks: 4, shard: "sddp", schedule: "gpipe", "train.batch": 1024 }],
  ],
  "gpt2-124m": [
    ["cpu", { stages: 2, data_parallel: 2, chunks: 64, checkpoint: "always" }],
    ["h100-sxm", { stages: 4, data_parallel: 16, chunks: 8 }],
    ["h200", { stages: 4, data_parallel: 256, chunks: 2, schedule: "zero_bubble" }],
  ],
  "llama-7b": [
    ["h100-sxm", { stages: 1, data_parallel: 8, chunks: 32, checkpoint: "always", schedule: "1f1b" }],
    ["h100-sxm", { stages: 4, data_parallel: 16, chunks: 16, checkpoint: "always", schedule: "1f1b" }],
    ["h200", { stages: 4, data_parallel: 256, chunks: 1, schedule: "gpipe" }],
  ],
  "gpt3-175b": [
    ["h100-sxm", { stages: 16, data_parallel: 32, chunks: 48, schedule: "1f1b" }],
    // FSDP on A100-80G fits with gradients reduced in bf16 (ZeRO's 16 B/param); with fp32 gradients it needs ~87 GiB.
    ["a100-80g", { stages: 32, data_parallel: 32, chunks: 48, schedule: "1f1b", shard: "fsdp", reshard_after_forward: false, "train.reduce_dtype": "bf16" }],
    ["h200", { stages: 16, data_parallel: 64, chunks: 24, schedule: "1f1b" }],
  ],
};

function checkInvariants(c: Compiled): void {
  const plan = c.plan;
  // What compile writes, the loader accepts as it is.
  expect(parsePlan(planToJson(plan))).toEqual(plan);
  const p = plan.predicted;
  expect(p.stepTimeSeconds).toBeGreaterThan(0);
  expect(p.bubbleFraction).toBeGreaterThanOrEqual(0);
  expect(p.bubbleFraction).toBeLessThan(1);
  expect(p.exposedCommSeconds).toBeLessThanOrEqual(p.stepTimeSeconds);
  expect(p.mfu).toBeGreaterThan(0);
  expect(p.mfu).toBeLessThan(1);
  expect(p.peakMemoryBytes.length).toBe(plan.cluster.devices);
  expect(p.modelStateBytes.length).toBe(plan.cluster.devices);
  for (const bytes of p.peakMemoryBytes) expect(bytes).toBeLessThanOrEqual(plan.cluster.memoryBytes);
  for (const [i, bytes] of p.modelStateBytes.entries()) expect(bytes, `device ${i}`).toBeLessThanOrEqual(p.peakMemoryBytes[i]!);
  // Every device runs exactly one program.
  expect(plan.programs.flatMap((x) => x.ranks).sort((a, b) => a - b)).toEqual(Array.from({ length: plan.cluster.devices }, (_, i) => i));
  for (const prog of plan.programs) for (const a of prog.actions) expect(a.end, `${prog.id} ${a.text}`).toBeGreaterThanOrEqual(a.start);
  // The reuse dependencies the memory plan added are met by the predicted run: the step time is unchanged.
  const again = runPrograms(c.programs, c.rendezvous);
  expect(again.complete).toBe(true);
  expect(again.makespan).toBeCloseTo(p.stepTimeSeconds, 9);
}

describe("every sample on three cluster shapes", () => {
  for (const [name, shapes] of Object.entries(SHAPES) as [SampleName, readonly Shape[]][]) {
    for (const [cluster, overrides] of shapes) {
      it(`${name} on ${cluster} with ${JSON.stringify(overrides)}`, () => checkInvariants(compileSample(name, cluster, overrides)));
    }
  }
});

describe("a 1024-device plan", () => {
  it("shares one program among the data-parallel replicas of each pipeline rank", () => {
    const c = compileSample("gpt3-175b", "h200", SHAPES["gpt3-175b"][2]![1]);
    const plan = c.plan;
    expect(plan.cluster.devices).toBe(1024);
    expect(plan.programs.length).toBe(16);
    expect(plan.programs.every((p) => p.ranks.length === 64)).toBe(true);
    expect(plan.mesh.shape).toEqual([16, 64, 1]);
    // Replica r of stage s is rank 64s + r and talks to replica r of its neighbours: peers are written for r = 0.
    expect(plan.programs[3]!.ranks[0]).toBe(192);
    const peers = plan.programs[3]!.actions.filter((a) => /SEND|RECV/.test(a.text)).map((a) => Number(a.text.split("@")[1]));
    expect(new Set(peers)).toEqual(new Set([128, 256]));
    // The tied embedding's gradient is summed between the first and the last stage, replica by replica.
    expect(plan.shard[0]!.tied.map((t) => [t.param, t.stages])).toEqual([["wte.weight", [0, 15]]]);
    const tied = (p: number) => plan.programs[p]!.actions.filter((a) => a.collective?.group === "tied").length;
    expect(tied(0)).toBeGreaterThan(0);
    expect(tied(0)).toBe(tied(15));
  });
});
