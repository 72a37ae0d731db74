// bench/run: training step time of mlp and gpt-tiny on one CPU device with each engine (reference,
// native-kernels, native: see src/runtime/engines.ts), achieved GFLOP/s, and
// that as a fraction of this machine's sgemm peak measured in the same run. Prints one JSON object; run with
// `npm run bench:run`.
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { sgemm } from "../src/native/binding.js";
import { runPlan, type Engine } from "../src/runtime/run-loop.js";

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
  const engines = [];
  for (const engine of ["reference", "native-kernels", "native"] as const) {
    const seconds = await stepSeconds(plan, engine, steps);
    const gflops = flops / seconds / 1e9;
    engines.push({ engine, stepMs: Number((seconds * 1e3).toFixed(3)), gflops: Number(gflops.toFixed(3)), fractionOfSgemmPeak: Number((gflops / peak).toFixed(4)) });
  }
  cases.push({ model: name, flopsPerStep: flops, engines, nativeSpeedupOverReference: Number((engines[0]!.stepMs / engines[2]!.stepMs).toFixed(2)) });
}
console.log(JSON.stringify({ bench: "run", node: process.version, sgemmPeakGflops: Number(peak.toFixed(1)), cases }));
