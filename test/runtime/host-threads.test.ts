// The executor runs CPU devices on a thread per stream, or on a few host threads that take turns on the devices
// (where a thread per stream would outnumber the cores: hostThreadsFor, src/runtime/world.ts). With the
// in-process communicator, fewer threads than devices split each collective in two: a device whose group has
// not met yet is set aside while its thread runs another. Every way must train the same plan to the same bits:
// data-parallel FSDP, a pipeline whose stages wait on their neighbours' activations (a thread computes, or runs
// another device, while a receive's message is not there yet), both at once, and with every communicator call
// delayed at random so that meetings complete in other orders. A failing device stops every device, and a
// device that stops responding is named by the timeout instead of hanging the run.
import { describe, expect, it } from "vitest";
import { syntheticData } from "../../src/data/synthetic.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { createEngine, EngineError } from "../../src/runtime/engines.js";
import { planFor, train, type Overrides, type Sample } from "../support/plan-parity.js";

describe("devices on a thread per stream, or taking turns on a few host threads", () => {
  const GPIPE_3: Overrides = { stages: 3, data_parallel: 1, shard: "none", chunks: 4, schedule: "gpipe", checkpoint: "never" };
  const cases: [string, Sample, number, Overrides][] = [
    ["FSDP over 2", "gpt-tiny", 2, { stages: 1, data_parallel: 2, shard: "fsdp", chunks: 2, checkpoint: "never" }],
    ["a 3-stage GPipe", "mlp", 3, GPIPE_3],
    ["2 stages × FSDP over 2, 1F1B", "gpt-tiny", 4, { stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2, schedule: "1f1b", checkpoint: "except_last" }],
  ];
  for (const [name, model, devices, settings] of cases) {
    it(`${name}: the same losses and weights, bit for bit, on 1, 2 and ${devices} host threads`, async () => {
      const plan = planFor(model, settings, devices);
      const separate = await train(plan, 3, { hostThreads: 0 });
      expect(separate.losses.every(Number.isFinite)).toBe(true);
      for (const hostThreads of [1, 2, devices]) {
        const turns = await train(plan, 3, { hostThreads });
        expect(turns.losses, `${hostThreads} host threads`).toEqual(separate.losses);
        for (const [name, values] of separate.params) expect(turns.params.get(name), `${name}, ${hostThreads} host threads`).toEqual(values);
      }
    });
  }

  it("2 host threads on 4 devices, every communicator call delayed at random: the same bits", async () => {
    const plan = planFor("gpt-tiny", cases[2]![3], 4);
    const separate = await train(plan, 2, { hostThreads: 0 });
    const delayed = await train(plan, 2, { hostThreads: 2, communicator: { kind: "delay", seed: 7, maxMicros: 200 } });
    expect(delayed.calls.allGather).toBeGreaterThan(0); // the run went through the delaying communicator
    expect(delayed.losses).toEqual(separate.losses);
    for (const [name, values] of separate.params) expect(delayed.params.get(name), name).toEqual(values);
  });

  for (const hostThreads of [1, 3]) {
    it(`a device failing on ${hostThreads} host thread(s) stops every device with its error`, async () => {
      const plan = planFor("mlp", GPIPE_3, 3);
      const graph = graphFromJson(plan.model.name, plan.graph);
      const data = syntheticData(graph, { batch: plan.settings.batch, seed: 3 });
      const engine = createEngine("native", plan, graph, 3, { hostThreads, fault: { kind: "kernel", device: 1, step: 1 } });
      const step = engine.step(data.batch(0));
      await expect(step).rejects.toThrow(EngineError);
      await expect(step).rejects.toThrow(/device 1.*injected fault/);
    });
  }

  it("a device that stops responding on 2 host threads: the others' timeout names it, no hang", async () => {
    const plan = planFor("gpt-tiny", cases[2]![3], 4);
    const graph = graphFromJson(plan.model.name, plan.graph);
    const data = syntheticData(graph, { batch: plan.settings.batch, seq: plan.settings.seq!, seed: 3 });
    const engine = createEngine("native", plan, graph, 3, { hostThreads: 2, timeoutSeconds: 0.5, fault: { kind: "hang", device: 1, step: 1 } });
    const t0 = performance.now();
    const step = engine.step(data.batch(0));
    await expect(step).rejects.toThrow(/timed out after 0\.5 s.*never \w+; busy computing, not waiting: device 1, action/);
    expect(performance.now() - t0).toBeLessThan(1400); // the peers' timeout, not the hang's own three timeouts
  });
});
