// GPT-2 124M in bf16 on one GPU (bench/gpu/check.sh, part 3): the plan compiled for one h200 at batch 8 × 1024
// (synthetic data, no pipeline, no sharding, no recompute), trained for some steps on the cuda device:
// median step time, tokens/s and MFU (the plan's model FLOPs per step over the profile's bf16 peak), and the
// device memory the driver sees the run take (free memory before the run minus free memory after its first
// step) against the plan's prediction. Prints one JSON object. PyTorch's numbers on the same model, batch and
// machine come from bench/gpu/pytorch_gpt2.py in the same check.
import { resolve } from "node:path";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { getProfile } from "../../src/cost/cluster.js";
import { nativeGpuMemory } from "../../src/native/binding.js";
import type { DeviceKind } from "../../src/runtime/device-choice.js";
import { runPlan } from "../../src/runtime/run-loop.js";

const root = resolve(import.meta.dirname, "../../..");
const device = (process.argv[2] ?? "cuda") as DeviceKind;
const steps = Number(process.argv[3] ?? 12);
const batch = Number(process.argv[4] ?? 8);
const seq = Number(process.argv[5] ?? 1024);
const profile = "h200";

const overrides = [
  `train.batch=${batch}`,
  `train.seq=${seq}`,
  "train.data=synthetic()",
  `train.steps=${steps}`,
  "train.precision=bf16",
  "parallel.devices=1",
  "parallel.stages=1",
  "parallel.chunks=1",
  "parallel.shard=none",
  "parallel.checkpoint=never",
  "parallel.reshard_after_forward=false",
];
const model = checkFile(resolve(root, "samples/gpt2-124m.fsm"), { overrides }).model;
if (!model) throw new Error("gpt2-124m does not check with the GPU check's settings");
const t0 = performance.now();
const plan = compileModel(model, { cluster: profile, devices: 1, source: "gpt2-124m", fsmVersion: "gpu-check" }).plan;
const compileSeconds = (performance.now() - t0) / 1e3;

const gpu = device === "cpu" ? undefined : device;
const before = gpu ? nativeGpuMemory(gpu, 0) : undefined;
let afterFirst: { freeBytes: number } | undefined;
const losses: number[] = [];
const times: number[] = [];
await runPlan(plan, {
  steps,
  engine: "native",
  device,
  onStep: (r) => {
    losses.push(r.loss);
    times.push(r.seconds);
    if (gpu && afterFirst === undefined) afterFirst = nativeGpuMemory(gpu, 0);
  },
});
// Where a step's time goes: one more step, traced on the device, its instructions' times summed by op (the
// compute stream's kernels; the communication stream's, if any, apart).
const byOp = new Map<string, { seconds: number; count: number }>();
let tracedStep = 0;
await runPlan(plan, {
  steps: 2,
  engine: "native",
  device,
  trace: true,
  onStep: (r) => (tracedStep = r.seconds),
  onDone: (engine) => {
    for (const { program, timings } of engine.lastTimings?.() ?? []) {
      program.instructions.forEach((ins, i) => {
        const key = `${ins.stream === 0 ? "" : "comm: "}${ins.op}`;
        const e = byOp.get(key) ?? { seconds: 0, count: 0 };
        e.seconds += timings[2 * i + 1]! - timings[2 * i]!;
        e.count++;
        byOp.set(key, e);
      });
    }
  },
});
const timeByOp = [...byOp].sort((a, b) => b[1].seconds - a[1].seconds).slice(0, 20).map(([op, e]) => ({ op, ms: e.seconds * 1e3, count: e.count }));

const warm = times.slice(2).sort((a, b) => a - b);
const stepSeconds = warm[Math.floor(warm.length / 2)] ?? times[times.length - 1]!;
const peak = getProfile(profile).peakFlops.bf16;
const measuredBytes = before && afterFirst ? before.freeBytes - afterFirst.freeBytes : null;
const predictedBytes = plan.predicted.peakMemoryBytes[0]!;
process.stdout.write(
  JSON.stringify({
    check: "gpt2",
    device,
    batch,
    seq,
    steps,
    compileSeconds,
    losses,
    stepSeconds,
    stepSecondsAll: times,
    tokensPerSecond: (batch * seq) / stepSeconds,
    flopsPerStep: plan.predicted.flopsPerStep,
    mfu: plan.predicted.flopsPerStep / stepSeconds / peak,
    predictedStepSeconds: plan.predicted.stepTimeSeconds,
    predictedMfu: plan.predicted.mfu,
    tracedStepSeconds: tracedStep,
    timeByOp,
    memory: { measuredBytes, predictedBytes, ratio: measuredBytes === null ? null : measuredBytes / predictedBytes, totalBytes: before?.totalBytes ?? null },
  }) + "\n",
);
