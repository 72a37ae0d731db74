// bench/run: training step time of mlp and gpt-tiny on one CPU device with each engine (reference,
// native-kernels, native: see src/runtime/engines.ts), the native executor's time as a fraction of
// native-kernels' (the same kernels driven action by action from TypeScript: a denominator measured in the
// same run, so runs on a noisy machine compare), achieved GFLOP/s, and
// that as a fraction of this machine's sgemm peak measured in the same run. Prints one JSON object; run with
// `npm run bench:run`.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { sgemm } from "../src/native/binding.js";
import { runPlan, type Engine } from "../src/runtime/run-loop.js";
import { calibratePlan } from "../src/runtime/calibrate.js";
import { parseCalibration } from "../src/cost/calibration.js";

const CASES = [
  { name: "mlp", steps: 60 },
  { name: "gpt-tiny", steps: 12 },
];

function sgemmPeakGflops(): number {
  const n = 1024;
  const a = new Float32Array(n * n).fill(0.5);
  const b = new Float32Array(n * n).fill(0.25);
  const c = new Float32Array(n * n);
  let best = Infinity;
  for (let i = 0; i < 8; i++) {
    const t0 = performance.now();
    sgemm(false, false, n, n, n, 1, a, b, 0, c);
    best = Math.min(best, performance.now() - t0);
  }
  return (2 * n ** 3) / (best * 1e6);
}

/** Median over steps (after 2 warm-up steps) of the native engine's device time: from the first
 *  instruction's start to the last one's end, from a trace — what the simulator models, without the host's
 *  per-step work (feeding the batch, starting the device threads, reading the losses). */
async function deviceStepSeconds(plan: ReturnType<typeof compileModel>["plan"], steps: number): Promise<number> {
  let events: { ts?: number; dur?: number; args?: { step?: number } }[] = [];
  await runPlan(plan, { steps, engine: "native", trace: true, onDone: (e) => (events = e.trace?.() ?? []) });
  const spans: number[] = [];
  for (let step = 3; step <= steps; step++) {
    const mine = events.filter((e) => e.args?.step === step && e.ts !== undefined);
    spans.push((Math.max(...mine.map((e) => e.ts! + e.dur!)) - Math.min(...mine.map((e) => e.ts!))) / 1e6);
  }
  return spans.sort((x, y) => x - y)[Math.floor(spans.length / 2)]!;
}

async function stepSeconds(plan: ReturnType<typeof compileModel>["plan"], engine: Engine, steps: number): Promise<number> {
  const times: number[] = [];
  await runPlan(plan, { steps, engine, onStep: (r) => times.push(r.seconds) });
  const warm = times.slice(Math.min(2, times.length - 1)).sort((x, y) => x - y);
  return warm[Math.floor(warm.length / 2)]!;
}

const peak = sgemmPeakGflops();
const cases = [];
for (const { name, steps } of CASES) {
  const model = checkFile(`samples/${name}.fsm`, { overrides: ["parallel.stages=1", "parallel.chunks=1", "parallel.checkpoint=never"] }).model!;
  const plan = compileModel(model, { cluster: "cpu", devices: 1, source: name, fsmVersion: "bench" }).plan;
  const flops = plan.predicted.flopsPerStep;
  const engines: { engine: Engine; stepMs: number; gflops: number; fractionOfSgemmPeak: number }[] = [];
  for (const engine of ["reference", "native-kernels", "native"] as const) {
    const seconds = await stepSeconds(plan, engine, steps);
    const gflops = flops / seconds / 1e9;
    engines.push({ engine, stepMs: Number((seconds * 1e3).toFixed(3)), gflops: Number(gflops.toFixed(3)), fractionOfSgemmPeak: Number((gflops / peak).toFixed(4)) });
  }
  // The cpu profile after `fsm calibrate`: predicted step time against the native engine's measured one.
  const calibration = parseCalibration(JSON.parse(JSON.stringify(await calibratePlan(plan, { repeats: 5 }))), "bench");
  const calibrated = compileModel(model, { cluster: "cpu", devices: 1, source: name, fsmVersion: "bench", calibration }).plan;
  const measured = await stepSeconds(calibrated, "native", steps);
  const device = await deviceStepSeconds(calibrated, steps);
  const prediction = {
    uncalibratedMs: Number((plan.predicted.stepTimeSeconds * 1e3).toFixed(3)),
    calibratedMs: Number((calibrated.predicted.stepTimeSeconds * 1e3).toFixed(3)),
    measuredNativeMs: Number((measured * 1e3).toFixed(3)),
    measuredOverCalibrated: Number((measured / calibrated.predicted.stepTimeSeconds).toFixed(3)),
    measuredDeviceMs: Number((device * 1e3).toFixed(3)),
    deviceOverCalibrated: Number((device / calibrated.predicted.stepTimeSeconds).toFixed(3)),
    hostOverheadMs: Number(((measured - device) * 1e3).toFixed(3)),
  };
  const ms = (e: Engine): number => engines.find((x) => x.engine === e)!.stepMs;
  cases.push({ model: name, flopsPerStep: flops, engines, nativeOverNativeKernels: Number((ms("native") / ms("native-kernels")).toFixed(3)), nativeSpeedupOverReference: Number((engines[0]!.stepMs / engines.find((e) => e.engine === "native")!.stepMs).toFixed(2)), prediction });
}
// PyTorch (Debian's, CPU) on the same GPT, batch and thread count, where installed.
function pytorchStepMs(p: ReturnType<typeof compileModel>["plan"]): { torch: string; threads: number; stepMs: number } | { skipped: string } {
  const python = "/usr/bin/python3";
  if (!existsSync(python) || spawnSync(python, ["-c", "import torch"]).status !== 0) return { skipped: "PyTorch is not installed (apt-get install -y python3-torch)" };
  const attention = p.graph.ops.find((o) => o.op === "attention")!;
  const wte = p.graph.params.find((x) => x.name === "wte.weight")!;
  const meta = {
    config: { d: Number(p.graph.tensors[wte.tensor]!.shape[1]), heads: attention.attrs.heads, n_layer: p.graph.layers.filter((l) => /^layers\.\d+$/.test(l.name)).length },
    batch: [p.settings.batch, p.settings.seq],
    params: p.graph.params.map((x) => ({ name: x.name, shape: p.graph.tensors[x.tensor]!.shape.map(Number) })),
    steps: 30,
    // OpenBLAS in the addon uses every core; PyTorch gets as many.
    threads: 2,
    lr: 3e-3,
  };
  const r = spawnSync(python, ["bench/pytorch_step.py", JSON.stringify(meta)], { encoding: "utf8", timeout: 300_000 });
  if (r.status !== 0) return { skipped: `bench/pytorch_step.py failed: ${r.stderr.trim().split("\n").pop()}` };
  return JSON.parse(r.stdout) as { torch: string; threads: number; stepMs: number };
}

const tinyModel = checkFile("samples/gpt-tiny.fsm", { overrides: ["parallel.stages=1", "parallel.chunks=1", "parallel.checkpoint=never"] }).model!;
const tinyPlan = compileModel(tinyModel, { cluster: "cpu", devices: 1, source: "gpt-tiny", fsmVersion: "bench" }).plan;
const torch = pytorchStepMs(tinyPlan);
const nativeTiny = cases.find((c) => c.model === "gpt-tiny")!.engines.find((e) => e.engine === "native")!.stepMs;
const pytorch = "stepMs" in torch ? { ...torch, model: "gpt-tiny", nativeStepMs: nativeTiny, pytorchOverNative: Number((torch.stepMs / nativeTiny).toFixed(2)) } : torch;
console.log(JSON.stringify({ bench: "run", node: process.version, sgemmPeakGflops: Number(peak.toFixed(1)), cases, pytorch }));
