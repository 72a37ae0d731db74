// The runtime's executable specification against the reference interpreter: a plan's step — stages,
// micro-batches, data-parallel replicas, every schedule — gives the full-batch step's loss and weights.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { initParams } from "../../src/interp/init.js";
import { TrainingSession } from "../../src/interp/session.js";
import { toKind, floats, type FloatTensor } from "../../src/interp/tensor.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { ReferenceExecutor } from "../../src/runtime/reference-step.js";
import { samplePath, sets } from "../compile/helpers.js";

type Overrides = Record<string, string | number>;

function parity(name: "mlp" | "gpt-tiny", overrides: Overrides, devices: number, steps = 3): void {
  const model = checkFile(samplePath(name), { overrides: sets(overrides) }).model!;
  const plan = compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
  // The runtime sees only the plan: its graph is rebuilt from the plan JSON.
  const graph = graphFromJson(plan.model.name, plan.graph);
  const exec = new ReferenceExecutor(plan, graph, "f64");
  const reference = new TrainingSession(graph, { seed: 7, float: "f64" });
  const init = initParams(graph, 7, "f64");
  const state = {
    params: new Map([...init].map(([k, v]) => [k, toKind(v, "f64")] as [string, FloatTensor])),
    state: new Map(reference.state),
  };
  const data = syntheticData(graph, { batch: plan.settings.batch, ...(plan.settings.seq !== null && { seq: plan.settings.seq }), seed: 11, float: "f64" });
  for (let step = 0; step < steps; step++) {
    const batch = data.batch(step);
    const want = reference.step(batch);
    const got = exec.step(state, batch);
    expect(got.loss).toBeCloseTo(want.loss, 10);
  }
  for (const [name, p] of reference.params) {
    const a = floats(p);
    const b = floats(state.params.get(name)!);
    // Relative to the tensor's scale: entries that are zero in exact arithmetic carry rounding noise only.
    let scale = 0;
    let worst = 0;
    for (let i = 0; i < a.length; i++) {
      scale = Math.max(scale, Math.abs(a[i]!));
      worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
    }
    expect(worst / scale, name).toBeLessThan(1e-9);
  }
}

describe("a plan's step equals the full-batch step (float64)", () => {
  it("mlp: 1 device, 1 micro-batch", () => parity("mlp", { stages: 1, data_parallel: 1, chunks: 1 }, 1));
  it("mlp: 2 stages × 2 replicas × 4 micro-batches, 1F1B", () => parity("mlp", { stages: 2, data_parallel: 2, chunks: 4 }, 4));
  it("mlp: 3 stages, GPipe, 8 micro-batches", () => parity("mlp", { stages: 3, data_parallel: 1, chunks: 8, schedule: "gpipe" }, 3));
  it("mlp: 2 stages, zero-bubble (split backward)", () => parity("mlp", { stages: 2, data_parallel: 1, chunks: 4, schedule: "zero_bubble" }, 2));
  it("mlp: 2 ranks × 2 virtual stages, interleaved", () => parity("mlp", { stages: 2, data_parallel: 1, chunks: 4, schedule: "interleaved", virtual_stages: 2 }, 2));
  // Adam divides by √v: a gradient that is zero in exact arithmetic (the attention key bias: softmax ignores
  // a constant shift) comes out as rounding noise whose sign depends on summation order, and Adam's default
  // eps turns it into full-size steps. A larger eps keeps the comparison about the plan, not the noise.
  const adam = { "train.optimizer": "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)" };
  it("gpt-tiny: 2 stages × 2 replicas, 2 micro-batches, adam + clipping, tied embedding", () =>
    parity("gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "none", checkpoint: "never", ...adam }, 4));
  it("gpt-tiny: 3 stages, checkpoint always", () => parity("gpt-tiny", { stages: 3, data_parallel: 1, chunks: 4, shard: "none", checkpoint: "always", ...adam }, 3));
});
