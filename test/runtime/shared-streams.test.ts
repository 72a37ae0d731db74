// The executor runs a CPU device's two streams on a thread each, or on one thread for both (where two threads
// per device would outnumber the cores: cluster-engine.ts). Both must train the same plan to the same bits,
// whichever the machine running the tests would pick by itself: data-parallel FSDP, a pipeline whose stages
// wait on their neighbours' activations (the shared thread computes while a receive's message is not there
// yet), and both at once; a failing device stops every device either way.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { createEngine, EngineError } from "../../src/runtime/engines.js";
import { samplePath, sets } from "../compile/helpers.js";

function planOf(name: "gpt-tiny" | "mlp", devices: number, settings: Record<string, string | number>) {
  const model = checkFile(samplePath(name), { overrides: sets(settings) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
}

/** Losses of 3 steps and every parameter afterwards. */
async function train(plan: ReturnType<typeof planOf>, sharedStreams: boolean): Promise<{ losses: number[]; params: Map<string, number[]> }> {
  const graph = graphFromJson(plan.model.name, plan.graph);
  const data = syntheticData(graph, { batch: plan.settings.batch, ...(plan.settings.seq !== null && { seq: plan.settings.seq }), seed: 3 });
  const engine = createEngine("native", plan, graph, 3, { sharedStreams });
  const losses: number[] = [];
  for (let step = 0; step < 3; step++) losses.push(await engine.step(data.batch(step)));
  const params = new Map(graph.params().map((p) => [p.name, Array.from(engine.param(p.name))]));
  return { losses, params };
}

describe("a device's streams on one thread or two", () => {
  const cases: [string, "gpt-tiny" | "mlp", number, Record<string, string | number>][] = [
    ["FSDP over 2", "gpt-tiny", 2, { stages: 1, data_parallel: 2, shard: "fsdp", chunks: 2, checkpoint: "never" }],
    ["a 3-stage GPipe", "mlp", 3, { stages: 3, data_parallel: 1, shard: "none", chunks: 4, schedule: "gpipe", checkpoint: "never" }],
    ["2 stages × FSDP over 2, 1F1B", "gpt-tiny", 4, { stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2, schedule: "1f1b", checkpoint: "except_last" }],
  ];
  for (const [name, model, devices, settings] of cases) {
    it(`${name}: the same losses and weights, bit for bit`, async () => {
      const plan = planOf(model, devices, settings);
      const [separate, shared] = [await train(plan, false), await train(plan, true)];
      expect(shared.losses).toEqual(separate.losses);
      for (const [name, values] of separate.params) expect(shared.params.get(name), name).toEqual(values);
      expect(separate.losses.every(Number.isFinite)).toBe(true);
    });
  }

  it("a device failing on the shared thread stops every device with its error", async () => {
    const plan = planOf("mlp", 3, { stages: 3, data_parallel: 1, shard: "none", chunks: 4, schedule: "gpipe", checkpoint: "never" });
    const graph = graphFromJson(plan.model.name, plan.graph);
    const data = syntheticData(graph, { batch: plan.settings.batch, seed: 3 });
    const engine = createEngine("native", plan, graph, 3, { sharedStreams: true, fault: { kind: "kernel", device: 1, step: 1 } });
    const step = engine.step(data.batch(0));
    await expect(step).rejects.toThrow(EngineError);
    await expect(step).rejects.toThrow(/device 1.*injected fault/);
  });
});
