// bench/calibrated: how well a calibrated compile predicts this machine. For mlp, gpt-tiny and the 867k GPT
// (bench/gpt-867k.fsm): `fsm calibrate` on the 1-device plan (op times with one core and with every core, the
// executor's overheads, the in-process communicator's collectives, the core count), then for 1, 2 and 4
// devices a compile with that calibration and a run of the plan on the native engine. Each plan runs in
// several interleaved rounds after a warm-up round (a shared machine's bursts of other work land on every plan
// alike) and its measured step is the median of the second half of every round's steps (the steady step). Prints one JSON object: per model and
// device count the measured and predicted step and their ratio, and the fullest device's arena against the
// plan's predicted peak. `npm run bench:calibrated`; `node dist/bench/calibrated.js --rounds 3 --steps 10`.
import { availableParallelism } from "node:os";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { parseCalibration } from "../src/cost/calibration.js";
import { calibratePlan } from "../src/runtime/calibrate.js";
import { runPlan } from "../src/runtime/run-loop.js";

const MODELS = [
  { name: "mlp", file: "samples/mlp.fsm" },
  { name: "gpt-tiny", file: "samples/gpt-tiny.fsm" },
  { name: "gpt-867k", file: "bench/gpt-867k.fsm" },
];
const DEVICES = [1, 2, 4];

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const rounds = arg("rounds", 3);
const steps = arg("steps", 8);
const only = process.argv.includes("--model") ? process.argv[process.argv.indexOf("--model") + 1] : undefined;

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const r3 = (x: number): number => Number(x.toFixed(3));

type Plan = ReturnType<typeof compileModel>["plan"];
const cases: { model: string; devices: number; plan: Plan; times: number[]; arena: number; predictedArena: number }[] = [];
const calibrations: Record<string, unknown> = {};
for (const m of MODELS.filter((x) => only === undefined || x.name === only)) {
  const model = checkFile(m.file, {}).model!;
  const base = compileModel(model, { cluster: "cpu", devices: 1, source: m.file, fsmVersion: "bench" }).plan;
  const t0 = performance.now();
  const file = await calibratePlan(base, { repeats: 5, devices: Math.max(...DEVICES) });
  const calibration = parseCalibration(JSON.parse(JSON.stringify(file)), `${m.name} calibration`);
  calibrations[m.name] = {
    seconds: r3((performance.now() - t0) / 1000),
    cores: file.cores,
    instructionUs: r3(file.host.instructionSeconds * 1e6),
    loopUs: r3(file.host.loopSeconds * 1e6),
    batchUs: r3((file.host.batchSeconds ?? 0) * 1e6),
    handoffUs: r3(file.host.handoffSeconds * 1e6),
    contention: file.contention.map((c) => ({ devices: c.devices, slowdown: r3(c.slowdown) })),
    stepUs: file.host.step.map((s) => ({ devices: s.devices, us: r3(s.seconds * 1e6) })),
    allReduce: file.collectives.filter((c) => c.kind === "all_reduce").map((c) => ({ ranks: c.ranks, latencyUs: r3(c.latencySeconds * 1e6), gbPerSecond: c.secondsPerByte > 0 ? r3(1e-9 / c.secondsPerByte) : null })),
  };
  for (const devices of DEVICES) {
    const plan = compileModel(model, { cluster: "cpu", devices, source: m.file, fsmVersion: "bench", calibration }).plan;
    cases.push({ model: m.name, devices, plan, times: [], arena: 0, predictedArena: 0 });
  }
}
// The predictions are of the steady step. Round 0 is a warm-up, unrecorded (the run loop's JavaScript runs
// unoptimized at first); and in every run a fresh executor's first dozen or so steps take 2-3× the steady
// time of a sub-millisecond step, so each round runs about a third of a second of steps (at least `steps`,
// at most 40) and records the second half.
for (let round = 0; round <= rounds; round++) {
  for (const c of cases) {
    const times: number[] = [];
    const n = Math.max(steps, Math.min(40, Math.ceil(0.3 / c.plan.predicted.stepTimeSeconds)));
    const summary = await runPlan(c.plan, { steps: n, engine: "native", onStep: (r) => times.push(r.seconds) });
    if (round > 0) c.times.push(...times.slice(Math.floor(n / 2)));
    const arenas = summary.peakMemoryBytes ?? [];
    const fullest = arenas.indexOf(Math.max(...arenas));
    c.arena = arenas[fullest] ?? 0;
    c.predictedArena = summary.predictedPeakMemoryBytes[fullest] ?? 0;
  }
}
const results = cases.map((c) => {
  const measured = median(c.times);
  const predicted = c.plan.predicted.stepTimeSeconds;
  const s = c.plan.settings;
  return {
    model: c.model,
    devices: c.devices,
    plan: `pp=${s.stages} dp=${s.dataParallel} shard=${s.shard} chunks=${s.microBatches}`,
    measuredMs: r3(measured * 1e3),
    predictedMs: r3(predicted * 1e3),
    measuredOverPredicted: r3(measured / predicted),
    arenaBytes: c.arena,
    predictedArenaBytes: c.predictedArena,
    arenaOverPredicted: c.predictedArena > 0 ? r3(c.arena / c.predictedArena) : null,
  };
});
const within = results.filter((r) => r.measuredOverPredicted >= 0.9 && r.measuredOverPredicted <= 1.1).length;
console.log(JSON.stringify({ bench: "calibrated", node: process.version, cores: availableParallelism(), rounds, stepsPerRound: steps, within10Percent: `${within}/${results.length}`, calibrations, results }, null, 1));
