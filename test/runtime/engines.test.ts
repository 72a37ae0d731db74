// The engines compute the same step: the native executor (a stream pair per device, sharded state,
// collectives), the reference executor driving the addon's kernels and the one driving the interpreter's
// agree within f32 rounding — for every schedule, micro-batching, replicas, stages.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import type { Plan } from "../../src/plan/plan.js";
import { runPlan, type Engine } from "../../src/runtime/run-loop.js";
import { samplePath, sets } from "../compile/helpers.js";

function plan(name: "mlp" | "gpt-tiny", overrides: Record<string, string | number>, devices: number): Plan {
  const model = checkFile(samplePath(name), { overrides: sets(overrides) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
}

async function train(p: Plan, engine: Engine, steps: number): Promise<{ losses: number[]; params: Map<string, Float32Array> }> {
  const losses: number[] = [];
  const params = new Map<string, Float32Array>();
  await runPlan(p, {
    steps,
    engine,
    onStep: (r) => losses.push(r.loss),
    onDone: (e) => {
      for (const prm of p.graph.params) params.set(prm.name, e.param(prm.name));
    },
  });
  return { losses, params };
}

const CASES: [string, "mlp" | "gpt-tiny", Record<string, string | number>, number][] = [
  ["mlp, 2 stages × 2 replicas × 4 micro-batches, 1F1B", "mlp", { stages: 2, data_parallel: 2, chunks: 4 }, 4],
  ["mlp, 3 stages, GPipe", "mlp", { stages: 3, data_parallel: 1, chunks: 4, schedule: "gpipe" }, 3],
  ["gpt-tiny, 2 stages × 2 replicas, ZB-H1", "gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, schedule: "zero_bubble", shard: "oss", checkpoint: "never" }, 4],
  ["gpt-tiny, interleaved, checkpoint always", "gpt-tiny", { stages: 2, data_parallel: 1, chunks: 2, schedule: "interleaved", virtual_stages: 2, shard: "none", checkpoint: "always" }, 2],
];

describe("engines agree", () => {
  for (const [title, name, overrides, devices] of CASES) {
    it(`${title}: native ≈ native-kernels ≈ reference`, async () => {
      const p = plan(name, overrides, devices);
      const kernels = await train(p, "native-kernels", 4);
      const reference = await train(p, "reference", 4);
      const cluster = await train(p, "native", 4);
      for (const run of [kernels, cluster]) run.losses.forEach((l, i) => expect(Math.abs(l - reference.losses[i]!) / Math.abs(reference.losses[i]!)).toBeLessThan(1e-5));
      for (const [k, v] of cluster.params) {
        const want = reference.params.get(k)!;
        for (let i = 0; i < v.length; i++) if (Math.abs(v[i]! - want[i]!) > 1e-5 + 1e-4 * Math.abs(want[i]!)) expect.fail(`${k}[${i}]: ${v[i]} vs ${want[i]}`);
      }
    });
  }

  it("the native engine is deterministic run to run", async () => {
    const p = plan("gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "none", checkpoint: "never" }, 4);
    const a = await train(p, "native", 3);
    const b = await train(p, "native", 3);
    expect(a.losses).toEqual(b.losses);
  });
});
