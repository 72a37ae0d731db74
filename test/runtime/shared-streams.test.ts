// The executor runs a CPU device's two streams on a thread each, or on one thread for both (where two threads
// per device would outnumber the cores: streamsShareThreads, src/runtime/world.ts). Both must train the same
// plan to the same bits: data-parallel FSDP, a pipeline whose stages wait on their neighbours' activations
// (the shared thread computes while a receive's message is not there yet), and both at once; a failing device
// stops every device either way.
import { describe, expect, it } from "vitest";
import { syntheticData } from "../../src/data/synthetic.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { createEngine, EngineError } from "../../src/runtime/engines.js";
import { planFor, train, type Overrides, type Sample } from "../support/plan-parity.js";

describe("a device's streams on one thread or two", () => {
  const GPIPE_3: Overrides = { stages: 3, data_parallel: 1, shard: "none", chunks: 4, schedule: "gpipe", checkpoint: "never" };
  const cases: [string, Sample, number, Overrides][] = [
    ["FSDP over 2", "gpt-tiny", 2, { stages: 1, data_parallel: 2, shard: "fsdp", chunks: 2, checkpoint: "never" }],
    ["a 3-stage GPipe", "mlp", 3, GPIPE_3],
    ["2 stages × FSDP over 2, 1F1B", "gpt-tiny", 4, { stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2, schedule: "1f1b", checkpoint: "except_last" }],
  ];
  for (const [name, model, devices, settings] of cases) {
    it(`${name}: the same losses and weights, bit for bit`, async () => {
      const plan = planFor(model, settings, devices);
      const [separate, shared] = [await train(plan, 3, { sharedStreams: false }), await train(plan, 3, { sharedStreams: true })];
      expect(shared.losses).toEqual(separate.losses);
      for (const [name, values] of separate.params) expect(shared.params.get(name), name).toEqual(values);
      expect(separate.losses.every(Number.isFinite)).toBe(true);
    });
  }

  it("a device failing on the shared thread stops every device with its error", async () => {
    const plan = planFor("mlp", GPIPE_3, 3);
    const graph = graphFromJson(plan.model.name, plan.graph);
    const data = syntheticData(graph, { batch: plan.settings.batch, seed: 3 });
    const engine = createEngine("native", plan, graph, 3, { sharedStreams: true, fault: { kind: "kernel", device: 1, step: 1 } });
    const step = engine.step(data.batch(0));
    await expect(step).rejects.toThrow(EngineError);
    await expect(step).rejects.toThrow(/device 1.*injected fault/);
  });
});
