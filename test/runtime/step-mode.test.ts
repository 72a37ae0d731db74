// How the run loop takes its steps (src/runtime/step-mode.ts): overlapped (the devices' run on a worker thread,
// the next batch made meanwhile) or blocking (the run on the loop's thread, the batch after), whichever its
// own trial measures faster. The choice moves no bit: a blocking step runs the same program on the same
// devices, and fails the same way.
import { describe, expect, it } from "vitest";
import { syntheticData } from "../../src/data/synthetic.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { createEngine, EngineError } from "../../src/runtime/engines.js";
import { StepModeChooser, type StepMode } from "../../src/runtime/step-mode.js";
import { runCli } from "../support/cli.js";
import { planFor } from "../support/plan-parity.js";
import { samplePath } from "../compile/helpers.js";

/** The modes a chooser asks for over `steps` steps, each taking `seconds(mode)`. */
function drive(chooser: StepModeChooser, steps: number, seconds: (mode: StepMode) => number): StepMode[] {
  const modes: StepMode[] = [];
  for (let i = 0; i < steps; i++) {
    const mode = chooser.mode();
    modes.push(mode);
    chooser.record(seconds(mode));
  }
  return modes;
}

describe("choosing the step mode", () => {
  it("an engine that cannot block: every step overlapped, settled from the start", () => {
    const c = new StepModeChooser(false);
    expect(c.settled()).toBe("overlapped");
    expect(new Set(drive(c, 300, () => 1e-4))).toEqual(new Set(["overlapped"]));
  });

  it("warm-up overlapped, then alternating blocks of each; the faster one kept", () => {
    const faster = (fast: StepMode) => (mode: StepMode) => (mode === fast ? 0.8e-4 : 1e-4);
    const c = new StepModeChooser(true);
    const modes = drive(c, 400, faster("blocking"));
    expect(modes.slice(0, 100).every((m) => m === "overlapped")).toBe(true);
    expect(modes.slice(100, 120).every((m) => m === "overlapped")).toBe(true);
    expect(modes.slice(120, 140).every((m) => m === "blocking")).toBe(true);
    expect(modes.slice(100, 260).filter((m) => m === "blocking")).toHaveLength(80);
    expect(c.settled()).toBe("blocking");
    expect(modes.slice(260).every((m) => m === "blocking")).toBe(true);

    const o = new StepModeChooser(true);
    drive(o, 260, faster("overlapped"));
    expect(o.settled()).toBe("overlapped");
    // Not settled before the trial ends.
    const early = new StepModeChooser(true);
    drive(early, 259, faster("blocking"));
    expect(early.settled()).toBeUndefined();
  });

  it("steps over 2 ms stay overlapped untried", () => {
    const c = new StepModeChooser(true);
    const modes = drive(c, 300, (m) => (m === "blocking" ? 1e-3 : 3e-3));
    expect(c.settled()).toBe("overlapped");
    expect(modes.every((m) => m === "overlapped")).toBe(true);
  });
});

describe("blocking steps", () => {
  it("train to the same bits as overlapped ones, and the mode shows in fsm run's summary", async () => {
    for (const [model, devices, settings] of [
      ["mlp", 2, { stages: 1, data_parallel: 2, shard: "oss", chunks: 2, checkpoint: "never" }],
      ["gpt-tiny", 1, { stages: 1, data_parallel: 1, shard: "none", chunks: 2, checkpoint: "never" }],
    ] as const) {
      const plan = planFor(model, settings, devices);
      const graph = graphFromJson(plan.model.name, plan.graph);
      const data = syntheticData(graph, { batch: plan.settings.batch, ...(plan.settings.seq !== null && { seq: plan.settings.seq }), seed: 3 });
      const run = async (blocking: boolean) => {
        const engine = createEngine("native", plan, graph, 3);
        expect(engine.canBlock).toBe(true);
        const losses: number[] = [];
        // Alternating in the second run: a mode switch mid-run moves nothing either.
        for (let s = 0; s < 4; s++) losses.push(await engine.step(data.batch(s), blocking && s % 2 === 0));
        return { losses, params: graph.params().map((p) => Array.from(engine.param(p.name))) };
      };
      const overlapped = await run(false);
      const blocking = await run(true);
      expect(blocking.losses, model).toEqual(overlapped.losses);
      expect(blocking.params, model).toEqual(overlapped.params);
    }
    const r = await runCli("run", samplePath("mlp"), "--steps", "300", "--json");
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split("\n").pop()!).summary as { stepMode?: string };
    expect(["overlapped", "blocking"]).toContain(summary.stepMode);
  }, 60_000);

  it("a kernel failing in a blocking step rejects the step with its error, as an overlapped one does", async () => {
    const plan = planFor("mlp", { stages: 3, data_parallel: 1, shard: "none", chunks: 4, schedule: "gpipe", checkpoint: "never" }, 3);
    const graph = graphFromJson(plan.model.name, plan.graph);
    const data = syntheticData(graph, { batch: plan.settings.batch, seed: 3 });
    const engine = createEngine("native", plan, graph, 3, { fault: { kind: "kernel", device: 1, step: 1 } });
    const step = engine.step(data.batch(0), true);
    await expect(step).rejects.toThrow(EngineError);
    await expect(step).rejects.toThrow(/device 1.*injected fault/);
  });
});
