// bench/calibrated: how well a calibrated compile predicts this machine. For mlp, gpt-tiny and the 867k GPT
// (bench/gpt-867k.fsm): `fsm calibrate` on the 1-device plan (op times with one core and with every core, the
// executor's overheads, the in-process communicator's collectives, the core count), then for 1, 2 and 4 devices
// a compile with that calibration and a run of the plan on the native engine, in a process of its own as
// `fsm run` is (bench/child-steps.ts; in this one's process, after its calibrations and compiles and with at most 40
// steps a round, mlp's 1-device step measured 0.24 ms where `fsm run` measured 0.11–0.14). Each plan runs in
// several interleaved rounds (a shared machine's bursts of other work land on every plan alike), each round a
// fresh process that warms up for about a fifth of a second of steps (at least `steps`: a fresh executor's first
// dozens of sub-millisecond steps are 2–3× the steady one, its JavaScript not yet optimized) and then records as
// many; the measured step is the median of every round's recorded steps. Prints one JSON object: per model and
// device count the measured and predicted step and their ratio, and the fullest device's arena against the
// plan's predicted peak. `npm run bench:calibrated`; `node dist/bench/calibrated.js --rounds 3 --steps 10`.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { parseCalibration } from "../src/cost/calibration.js";
import { calibratePlan } from "../src/runtime/calibrate.js";
import { childFromArgs, median, round, snapshotAddon, stepsInChildren } from "./child-steps.js";

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


type Plan = ReturnType<typeof compileModel>["plan"];

async function parent(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "fsm-bench-calibrated-"));
  const addon = snapshotAddon(dir);
  const script = fileURLToPath(import.meta.url);
  const cases: { model: string; devices: number; plan: Plan; file: string; times: number[]; arena: number; predictedArena: number }[] = [];
  const calibrations: Record<string, unknown> = {};
  try {
    for (const m of MODELS.filter((x) => only === undefined || x.name === only)) {
      const model = checkFile(m.file, {}).model!;
      const base = compileModel(model, { cluster: "cpu", devices: 1, source: m.file, fsmVersion: "bench" }).plan;
      const t0 = performance.now();
      const file = await calibratePlan(base, { repeats: 5, devices: Math.max(...DEVICES) });
      const calibration = parseCalibration(JSON.parse(JSON.stringify(file)), `${m.name} calibration`);
      calibrations[m.name] = {
        seconds: round((performance.now() - t0) / 1000),
        cores: file.cores,
        instructionUs: round(file.host.instructionSeconds * 1e6),
        loopUs: round(file.host.loopSeconds * 1e6),
        batchUs: round((file.host.batchSeconds ?? 0) * 1e6),
        handoffUs: round(file.host.handoffSeconds * 1e6),
        contention: file.contention.map((c) => ({ devices: c.devices, slowdown: round(c.slowdown) })),
        stepUs: file.host.step.map((s) => ({ devices: s.devices, us: round(s.seconds * 1e6) })),
        blockingStepUs: (file.host.blockingStep ?? []).map((s) => ({ devices: s.devices, us: round(s.seconds * 1e6) })),
        allReduce: file.collectives.filter((c) => c.kind === "all_reduce").map((c) => ({ ranks: c.ranks, latencyUs: round(c.latencySeconds * 1e6), gbPerSecond: c.secondsPerByte > 0 ? round(1e-9 / c.secondsPerByte) : null })),
      };
      for (const devices of DEVICES) {
        const plan = compileModel(model, { cluster: "cpu", devices, source: m.file, fsmVersion: "bench", calibration }).plan;
        const planFile = join(dir, `${m.name}-${devices}.json`);
        writeFileSync(planFile, JSON.stringify(plan));
        cases.push({ model: m.name, devices, plan, file: planFile, times: [], arena: 0, predictedArena: 0 });
      }
    }
    const runs = stepsInChildren(script, addon, cases.map((c) => ({ file: c.file, predictedStepSeconds: c.plan.predicted.stepTimeSeconds })), rounds, steps, (i) => `${cases[i]!.model} on ${cases[i]!.devices} devices`);
    runs.forEach((rounds, i) => {
      const c = cases[i]!;
      c.times.push(...rounds.flatMap((out) => out.stepsMs.map((ms) => ms / 1e3)));
      c.arena = rounds.at(-1)!.arenaBytes;
      c.predictedArena = rounds.at(-1)!.predictedArenaBytes;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const results = cases.map((c) => {
    const measured = median(c.times);
    const predicted = c.plan.predicted.stepTimeSeconds;
    const s = c.plan.settings;
    return {
      model: c.model,
      devices: c.devices,
      plan: `pp=${s.stages} dp=${s.dataParallel} shard=${s.shard} chunks=${s.microBatches}`,
      measuredMs: round(measured * 1e3),
      predictedMs: round(predicted * 1e3),
      measuredOverPredicted: round(measured / predicted),
      arenaBytes: c.arena,
      predictedArenaBytes: c.predictedArena,
      arenaOverPredicted: c.predictedArena > 0 ? round(c.arena / c.predictedArena) : null,
    };
  });
  const within = results.filter((r) => r.measuredOverPredicted >= 0.9 && r.measuredOverPredicted <= 1.1).length;
  console.log(JSON.stringify({ bench: "calibrated", node: process.version, cores: availableParallelism(), rounds, stepsPerRound: steps, within10Percent: `${within}/${results.length}`, calibrations, results }, null, 1));
}

const argv = process.argv.slice(2);
if (argv[0] === "--child") await childFromArgs(argv);
else await parent();
