// Each device's arena (what the native engine allocates and touches once) against the plan's predicted peak
// for that device: the runtime must stay close to the memory plan the compiler priced (bench:cluster
// reports every device; here the fullest device of each plan, checkpointing off — recompute plans keep
// transient forward values the plan does not price yet).
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { lower } from "../../src/lower/lower.js";
import { samplePath, sets } from "../compile/helpers.js";

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
      const predicted = plan.predicted.peakMemoryBytes[fullest]!;
      expect(arenas[fullest]! / predicted, `device ${fullest}: ${arenas[fullest]} B vs ${predicted} B predicted`).toBeLessThanOrEqual(1.1);
      // Live bytes never exceed the arena (the layout's own consistency).
      for (const d of program.devices) expect(d.liveBytes).toBeLessThanOrEqual(d.arenaBytes);
    });
  }
});
