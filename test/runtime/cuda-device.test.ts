// Plans on the CUDA device, run here on its emulation ("simt": the CUDA device's own sources — device, kernel
// launchers, kernels — on the SIMT emulator, its buffers reaching the in-process communicator through host
// staging): the same losses as on CPU virtual devices for one device, a pipeline and FSDP (the GPU check runs
// the same comparison on a real GPU); mixed precision with 16-bit operands read directly; the arenas a GPU
// plan records; a failing device stopping every device, as on the CPU.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import type { Plan } from "../../src/plan/plan.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { planParity, trainOn } from "../../bench/gpu/plan-parity.js";
import { runCli } from "../support/cli.js";
import { planFor } from "../support/plan-parity.js";
import { samplePath, sets } from "../compile/helpers.js";

// Adam with a large eps: gradients zero in exact arithmetic (the attention key bias) make no rounding-noise
// steps, so the comparison is about the kernels.
const ADAM = "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)";

function plan(sample: "gpt-tiny" | "mlp", overrides: Record<string, string | number>, devices: number, cluster = "cpu"): Plan {
  const model = checkFile(samplePath(sample), { overrides: sets({ checkpoint: "never", "train.optimizer": ADAM, ...overrides }) }).model!;
  return compileModel(model, { cluster, devices, source: sample, fsmVersion: "test" }).plan;
}

describe("plans on the CUDA device (emulated) compute what CPU devices do", () => {
  const shapes: [string, Record<string, string | number>, number][] = [
    ["1 device", { stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1],
    ["2 stages pipelined (1F1B, 2 micro-batches)", { stages: 2, data_parallel: 1, chunks: 2, shard: "none", schedule: "1f1b" }, 2],
    ["FSDP over 2 devices", { stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp" }, 2],
  ];
  for (const sample of ["gpt-tiny", "mlp"] as const) {
    for (const [name, o, devices] of shapes) {
      it(`${sample}, ${name}: every step's loss within rtol 1e-4 of the CPU's, the weights after 3 steps within 1e-3`, async () => {
        const r = await planParity(plan(sample, { "train.precision": "fp32", ...o }, devices), 3, "simt");
        expect(r.lossErrors.length).toBe(3);
        for (const e of r.lossErrors) expect(e).toBeLessThanOrEqual(1e-4);
        expect(r.worstParamError, r.worstParam).toBeLessThanOrEqual(1e-3);
        expect(r.ok).toBe(true);
      });
    }
  }

  // Heads (GQA key/value heads too) and the vocabulary split over the group; the norms on a part of the
  // sequence; FSDP over each tensor rank's replicas.
  const tensorParallel: ["gpt-tiny" | "llama-tiny", string, Record<string, string | number>, number][] = [
    ["gpt-tiny", "tensor parallel 2", { tensor_parallel: 2, stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 2],
    ["llama-tiny", "tensor parallel 2, sequence parallel, FSDP over 2 replicas", { tensor_parallel: 2, sequence_parallel: "true", stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4],
  ];
  for (const [sample, name, o, devices] of tensorParallel) {
    it(`${sample}, ${name}: every step's loss within rtol 1e-4 of the CPU's, the weights after 3 steps within 1e-3`, async () => {
      const p = sample === "llama-tiny" ? planFor("llama-tiny", { ...o, checkpoint: "never" }, devices) : plan(sample, { "train.precision": "fp32", ...o }, devices);
      expect(p.settings.tensorParallel).toBe(2);
      const r = await planParity(p, 3, "simt");
      expect(r.lossErrors.length).toBe(3);
      for (const e of r.lossErrors) expect(e).toBeLessThanOrEqual(1e-4);
      expect(r.worstParamError, r.worstParam).toBeLessThanOrEqual(1e-3);
      expect(r.ok).toBe(true);
    });
  }

  it("bf16 tensor parallel 2 with sequence parallelism (16-bit activations widened around the collectives) tracks the CPU's bf16 run and trains", async () => {
    const p = plan("gpt-tiny", { "train.precision": "bf16", tensor_parallel: 2, sequence_parallel: "true", stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 2);
    const cpu = await trainOn(p, 4, "cpu");
    const gpu = await trainOn(p, 4, "simt");
    gpu.losses.forEach((l, i) => expect(Math.abs(l - cpu.losses[i]!) / cpu.losses[i]!, `step ${i + 1}`).toBeLessThan(0.01));
    expect(gpu.losses[3]!).toBeLessThan(gpu.losses[0]!);
  });

  it("bf16 with 16-bit operands read directly tracks the CPU's bf16 run (which widens them) and trains", async () => {
    const p = plan("gpt-tiny", { "train.precision": "bf16", stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp" }, 2);
    const cpu = await trainOn(p, 4, "cpu");
    const gpu = await trainOn(p, 4, "simt");
    gpu.losses.forEach((l, i) => expect(Math.abs(l - cpu.losses[i]!) / cpu.losses[i]!, `step ${i + 1}`).toBeLessThan(0.01));
    expect(gpu.losses[3]!).toBeLessThan(gpu.losses[0]!);
  });

  it("a bf16 plan for GPUs runs in the arenas compile recorded for it, and fsm run says so", async () => {
    const dir = (await import("node:fs")).mkdtempSync((await import("node:path")).join((await import("node:os")).tmpdir(), "fsm-cuda-"));
    const file = `${dir}/gpu.json`;
    const c = await runCli("compile", samplePath("gpt-tiny"), "--cluster", "h100-sxm", "--devices", "2", ...sets({ stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp", checkpoint: "never", "train.precision": "bf16" }).flatMap((s) => ["--set", s]), "-o", file);
    expect(c.code, c.stderr).toBe(0);
    const r = await runCli("run", file, "--device", "simt", "--steps", "2");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^run gpt_tiny: 2 simt devices \(the CUDA device's code emulated on the CPU\) = 1 stage × 2 data-parallel/m);
    expect(r.stdout).toMatch(/memory: fullest device \d holds .* \(its arena; the plan's .*, as compile laid it out\)/);
    // What each device holds (its arena and what the device reserves besides: kernel scratch, cuBLAS's
    // workspace) is exactly what the plan predicts.
    const j = await runCli("run", file, "--device", "simt", "--steps", "1", "--json");
    const summary = (JSON.parse(j.stdout.trim().split("\n").at(-1)!) as { summary: { peakMemoryBytes: number[]; predictedPeakMemoryBytes: number[] } }).summary;
    expect(summary.peakMemoryBytes).toEqual(summary.predictedPeakMemoryBytes);
    const plan = JSON.parse((await import("node:fs")).readFileSync(file, "utf8")) as Plan;
    const reserved = plan.memory[0]!.runtime!.reservedBytes!;
    expect(reserved[0]).toBeGreaterThanOrEqual(32 * 2 ** 20);  // cuBLAS's workspace at least
    expect(summary.peakMemoryBytes[0]).toBe(plan.memory[0]!.runtime!.arenaBytes[0]! + reserved[0]!);
  });

  it("a traced step is timed on the device (events around each instruction), every event inside its step", async () => {
    const p = plan("gpt-tiny", { "train.precision": "fp32", stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp" }, 2);
    let events: import("../../src/runtime/trace.js").TraceEvent[] = [];
    const seconds: number[] = [];
    await runPlan(p, { steps: 2, engine: "native", device: "simt", trace: true, onStep: (r) => seconds.push(r.seconds), onDone: (_e, t) => (events = t) });
    const timed = events.filter((e) => e.ph === "X");
    expect(new Set(timed.map((e) => `${e.pid}:${e.tid}`))).toEqual(new Set(["0:0", "0:1", "1:0", "1:1"]));
    for (const step of [1, 2]) {
      const mine = timed.filter((e) => e.args?.step === step);
      const from = Math.min(...mine.map((e) => e.ts!));
      const to = Math.max(...mine.map((e) => e.ts! + e.dur!));
      for (const e of mine) expect(e.dur!).toBeGreaterThanOrEqual(0);
      expect((to - from) / 1e6).toBeLessThanOrEqual(seconds[step - 1]! * 1.05 + 1e-3);
    }
  });

  it("a kernel failure on one device stops every device with one error naming it", async () => {
    const p = plan("gpt-tiny", { "train.precision": "fp32", stages: 2, data_parallel: 1, chunks: 2, shard: "none" }, 2);
    await expect(runPlan(p, { steps: 2, engine: "native", device: "simt", injectFault: { kind: "kernel", device: 1, step: 1 }, timeoutSeconds: 20 })).rejects.toThrow(
      /^step 1: device 1, action 1[FBRIW]\d+: kernel [a-z_]+ failed: injected fault$/,
    );
  });
});
