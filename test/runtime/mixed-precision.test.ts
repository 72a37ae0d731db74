// Mixed precision on the native cluster: 16-bit storage of weights' compute copies, activations and their
// gradients, fp32 kernels, fp32 master weights, gradients and optimizer state; fp16 loss scaling with
// skipped steps on overflow. References: the fp32 run of the same plan (bf16/fp16 track it within their
// precision), the plan's memory model (16-bit values halve activation memory), and hand-checked scaler rules.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { initParams } from "../../src/interp/init.js";
import { createNativeCluster } from "../../src/native/binding.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { lower } from "../../src/lower/lower.js";
import { feedBatch, meanLoss } from "../../src/runtime/cluster-step.js";
import { readParam, writeParams } from "../../src/lower/param-pieces.js";
import { LossScaler } from "../../src/runtime/loss-scaler.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { samplePath, sets } from "../compile/helpers.js";

type Overrides = Record<string, string | number>;

// Adam's default eps turns gradients that are zero in exact arithmetic (the attention key bias) into full
// steps of either sign depending on rounding; a larger eps keeps the comparison about precision, not noise.
const ADAM = "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)";

function planFor(overrides: Overrides, devices: number): Plan {
  const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ checkpoint: "never", "train.optimizer": ADAM, ...overrides }) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: "gpt-tiny", fsmVersion: "test" }).plan;
}

async function losses(plan: Plan, steps: number): Promise<{ losses: number[]; skipped: boolean[]; params: Map<string, Float32Array> }> {
  const out = { losses: [] as number[], skipped: [] as boolean[], params: new Map<string, Float32Array>() };
  await runPlan(plan, {
    steps,
    engine: "native",
    onStep: (r) => {
      out.losses.push(r.loss);
      out.skipped.push(r.skipped ?? false);
    },
    onDone: (e) => {
      for (const p of plan.graph.params) out.params.set(p.name, e.param(p.name));
    },
  });
  return out;
}

describe("the loss scaler", () => {
  it("dynamic: halves on overflow, doubles after the growth interval of clean steps, restarting the count on overflow", () => {
    const s = new LossScaler(1024, true, 3);
    s.update(false);
    s.update(false);
    expect(s.scale).toBe(1024);
    s.update(true);
    expect(s.scale).toBe(512);
    s.update(false);
    s.update(false);
    expect(s.scale).toBe(512);
    s.update(false);
    expect(s.scale).toBe(1024);
    expect(LossScaler.of("dynamic").scale).toBe(65536);
  });
  it("fixed: never changes", () => {
    const s = LossScaler.of(128);
    s.update(true);
    s.update(false);
    expect(s.scale).toBe(128);
  });
});

describe("bf16 and fp16 track fp32", () => {
  const shapes: [string, Overrides, number][] = [
    ["1 device", { stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1],
    ["fsdp 2 stages × 2 replicas", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4],
    ["sddp 1 stage × 4 replicas", { stages: 1, data_parallel: 4, chunks: 2, shard: "sddp" }, 4],
    ["oss 2 stages × 2 replicas", { stages: 2, data_parallel: 2, chunks: 2, shard: "oss" }, 4],
  ];
  for (const [title, o, devices] of shapes) {
    for (const precision of ["bf16", "fp16"] as const) {
      it(`${precision}, ${title}: losses within 0.5% of fp32 over 10 steps, falling, no step skipped`, async () => {
        const fp32 = await losses(planFor({ ...o, "train.precision": "fp32" }, devices), 10);
        // A fixed fp16 loss scale that never overflows here, so every step is compared (dynamic scaling,
        // which skips steps, has its own test).
        const half = await losses(planFor({ ...o, "train.precision": precision, ...(precision === "fp16" && { "train.loss_scale": 1024 }) }, devices), 10);
        const tol = 0.005;
        half.losses.forEach((l, i) => expect(Math.abs(l - fp32.losses[i]!) / fp32.losses[i]!, `step ${i + 1}: ${l} vs ${fp32.losses[i]}`).toBeLessThan(tol));
        expect(half.losses[9]!).toBeLessThan(half.losses[0]! - 0.3);
        expect(half.skipped.every((s) => !s)).toBe(true);
        // Master weights stay fp32 and near the fp32 run's.
        for (const [p, want] of fp32.params) {
          const got = half.params.get(p)!;
          let worst = 0;
          let scale = 0;
          for (let i = 0; i < want.length; i++) {
            worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
            scale = Math.max(scale, Math.abs(want[i]!));
          }
          expect(worst / scale, p).toBeLessThan(0.05);
        }
      });
    }
  }

  it("the 16-bit arena holds less than the fp32 one: activations, their gradients and the compute weights are 2 bytes", () => {
    const o = { stages: 1, data_parallel: 1, chunks: 1, shard: "none", "train.batch": 32 };
    const device = (precision: string) => {
      const plan = planFor({ ...o, "train.precision": precision }, 1);
      return lower(plan, graphFromJson(plan.model.name, plan.graph)).devices[0]!;
    };
    // Not half: fp32 master weights are added, gradients stay fp32, and each op's operands are widened
    // to f32 working copies while it runs.
    expect(device("bf16").arenaBytes).toBeLessThan(0.9 * device("fp32").arenaBytes);
    expect(device("bf16").liveBytes).toBeLessThan(0.8 * device("fp32").liveBytes);
    expect(device("fp16").arenaBytes).toBeLessThanOrEqual(device("bf16").arenaBytes + 64 * 4);
  });
});

describe("fp16 loss scaling on the cluster", () => {
  it("dynamic scaling: an overflowing step is skipped and the scale halves, then training goes on", async () => {
    // One micro-batch of one sequence of 2 tokens per replica (parameter gradients and their partials are
    // fp32, so the overflow must come from a 16-bit activation gradient): the loss gradient seed S/8 per
    // token, grown through the backward's layer norms, overflows f16 at S = 2^16.
    const plan = planFor({ stages: 1, data_parallel: 4, chunks: 1, shard: "none", "train.precision": "fp16", "train.batch": 4, "train.seq": 2 }, 4);
    const reports: { skipped: boolean; scale: number; loss: number }[] = [];
    await runPlan(plan, { steps: 8, engine: "native", onStep: (r) => reports.push({ skipped: r.skipped!, scale: r.lossScale!, loss: r.loss }) });
    expect(reports[0]).toMatchObject({ skipped: true, scale: 65536 });
    for (let i = 1; i < reports.length; i++) expect(reports[i]!.scale).toBe(reports[i - 1]!.skipped ? reports[i - 1]!.scale / 2 : reports[i - 1]!.scale);
    expect(reports.filter((r) => !r.skipped).length).toBeGreaterThanOrEqual(4);
    expect(reports[7]!.loss).toBeLessThan(reports[0]!.loss - 0.1);
  });

  it("an overflowing scale skips the update on every device; a safe one applies it", async () => {
    const plan = planFor({ stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", "train.precision": "fp16" }, 4);
    const graph = graphFromJson(plan.model.name, plan.graph);
    const program = lower(plan, graph);
    expect(program.lossScaling).toBeDefined();
    const cluster = createNativeCluster({ devices: program.devices, timeoutSeconds: 20 });
    const init = initParams(graph, 5, "f32");
    writeParams(cluster, program, (n) => init.get(n)!.data as Float32Array);
    const data = syntheticData(graph, { batch: plan.settings.batch, seq: plan.settings.seq!, seed: 3 });
    const step = async (scale: number): Promise<{ overflow: boolean; loss: number }> => {
      feedBatch(cluster, program, data.batch(0), plan.settings.microBatches, plan.settings.microBatchSize);
      program.lossScaling!.forEach((s, d) => {
        if (s.scale !== undefined) cluster.set(d, s.scale, Float32Array.of(scale));
        cluster.set(d, s.inverse, Float32Array.of(1 / scale));
      });
      await cluster.run();
      const flags = program.lossScaling!.map((s, d) => cluster.get(d, s.overflow)[0]!);
      // One verdict on every device.
      expect(new Set(flags.map((f) => f !== 0)).size).toBe(1);
      return { overflow: flags[0]! !== 0, loss: meanLoss(cluster, program) };
    };
    const before = readParam(cluster, program, "wte.weight");
    // 2^40 · ∂loss overflows f16 (max 65504) in the first gradient stored.
    expect((await step(2 ** 40)).overflow).toBe(true);
    expect(Array.from(readParam(cluster, program, "wte.weight"))).toEqual(Array.from(before));
    const ok = await step(2 ** 10);
    expect(ok.overflow).toBe(false);
    expect(Array.from(readParam(cluster, program, "wte.weight"))).not.toEqual(Array.from(before));
  });
});

describe("16-bit gradient reduction", () => {
  it("is planned (half the gradient bytes) but not run: the runtime says so instead of reducing in fp32", async () => {
    const fp32 = planFor({ "train.precision": "bf16", stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp" }, 2);
    const bf16 = planFor({ "train.precision": "bf16", "train.reduce_dtype": "bf16", stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp" }, 2);
    expect(bf16.settings.reduceDtype).toBe("bf16");
    expect(fp32.settings.reduceDtype).toBeUndefined();
    // The sharded gradient: 2 bytes per element instead of 4.
    expect(bf16.shard[0]!.stateBytes[0]!.grad * 2).toBe(fp32.shard[0]!.stateBytes[0]!.grad);
    await expect(runPlan(bf16, { steps: 1, engine: "native" })).rejects.toThrow(/not implemented: gradients reduced in bf16 \(train\.reduce_dtype\)/);
  });
});
