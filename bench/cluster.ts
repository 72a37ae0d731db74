// bench/cluster: the `native` engine (src/runtime/cluster-engine.ts: per virtual device an arena and a compute
// and a communication stream, the devices taking turns on host threads where a thread per stream would
// outnumber the cores) on this machine's CPUs, for mlp and gpt-tiny on 4 devices (FSDP, ShardedDDP
// and no sharding, with and without a 2-stage pipeline) and on 1 device. Per case:
//   - the median measured step time of `native` and of the 1-device plan of the same model and global batch,
//     and their ratio (the devices share this machine's cores, so the ratio is what the executor's scheduling
//     of several devices costs), next to the plan's predicted step time. Each plan runs in a process of its
//     own as `fsm run` is, in --rounds interleaved rounds, each warming up for about a fifth of a second of
//     steps first (bench/child-steps.ts stepsInChildren): in one process, 48 steps after 2 of warm-up, the
//     same 1-device mlp plan measured 0.24 and 0.11 ms a step as the first case and as a later one;
//   - per device, the bytes of the native arena against the plan's predicted peak (ratio > 1: the arena holds
//     more than the plan said a device needs), and the most bytes of slots live at once in it (liveBytes: the
//     arena less fragmentation; see DeviceProgram.liveBytes);
//   - from a few traced native steps (overlapFromTimings, src/runtime/overlap.ts): per device and overall,
//     the time the communication stream spent in `comm.*` instructions and the fraction of it during which
//     the same device's compute stream was running a kernel ("hidden"); next to it, the same measure on the
//     plan's own predicted action times (overlap.predicted; comm there is transfer time, no waiting).
// All virtual devices share this machine's cores, so the times say how the engine schedules, not how a real
// cluster would scale. Prints one JSON object; run with `npm run bench:cluster`
// (`node dist/bench/cluster.js --rounds 3 --steps 20`).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { syntheticData } from "../src/data/synthetic.js";
import type { Plan } from "../src/plan/plan.js";
import { programOfRank } from "../src/plan/listing.js";
import { graphFromJson } from "../src/plan/graph-from-json.js";
import { createEngine } from "../src/runtime/engines.js";
import { overlapFromTimings, overlapOfIntervals, type Interval, type Overlap } from "../src/runtime/overlap.js";
import { childFromArgs, median, round, snapshotAddon, stepsInChildren } from "./child-steps.js";

const WARMUP = 2;
const TRACED = 20; // traced native steps after WARMUP untraced-in-the-result ones
const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = arg("rounds", 3);
const STEPS = arg("steps", 20); // recorded steps a round, at least (after as many of warm-up)

interface Case {
  readonly model: string;
  readonly name: string;
  readonly devices: number;
  readonly overrides: readonly string[];
}

const CONFIGS: readonly { name: string; devices: number; overrides: string[] }[] = [
  { name: "fsdp pp=1 dp=4", devices: 4, overrides: ["parallel.shard=fsdp", "parallel.stages=1", "parallel.data_parallel=4", "parallel.chunks=2"] },
  { name: "fsdp pp=2 dp=2", devices: 4, overrides: ["parallel.shard=fsdp", "parallel.stages=2", "parallel.data_parallel=2", "parallel.chunks=2"] },
  { name: "none pp=1 dp=4", devices: 4, overrides: ["parallel.shard=none", "parallel.stages=1", "parallel.data_parallel=4", "parallel.chunks=2"] },
  { name: "sddp pp=2 dp=2", devices: 4, overrides: ["parallel.shard=sddp", "parallel.stages=2", "parallel.data_parallel=2", "parallel.chunks=2"] },
  { name: "1 device", devices: 1, overrides: ["parallel.shard=none", "parallel.stages=1", "parallel.data_parallel=1", "parallel.chunks=1"] },
];

const CASES: Case[] = [
  ...["gpt-tiny", "mlp"].flatMap((model) => CONFIGS.map((c) => ({ model, ...c }))),
  // gpt-tiny's default batch (8) leaves each device a micro-batch of 1: too little compute to hide anything.
  { model: "gpt-tiny", name: "fsdp pp=1 dp=4 batch=64", devices: 4, overrides: ["parallel.shard=fsdp", "parallel.stages=1", "parallel.data_parallel=4", "parallel.chunks=2", "train.batch=64"] },
];


function compile(c: Case): Plan {
  const checked = checkFile(`samples/${c.model}.fsm`, { overrides: [...c.overrides, "parallel.checkpoint=never"] });
  if (!checked.model) throw new Error(`${c.model} ${c.name}: ${checked.diagnostics.map((d) => d.message).join("; ")}`);
  return compileModel(checked.model, { cluster: "cpu", devices: c.devices, source: c.model, fsmVersion: "bench" }).plan;
}

/** Traced native steps: per device the overlap summed over the traced steps (after WARMUP), and the steps' ms;
 *  per device its arena. */
async function overlap(plan: Plan): Promise<{ perDevice: Overlap[]; tracedStepMs: number; liveBytes: number[]; arenaBytes: readonly number[] }> {
  const graph = graphFromJson(plan.model.name, plan.graph);
  const engine = createEngine("native", plan, graph, plan.run!.seed, { trace: true });
  const seq = plan.settings.seq;
  const data = syntheticData(graph, { batch: plan.settings.batch, ...(seq !== null && { seq }), seed: plan.run!.seed });
  let sums: { commSeconds: number; hiddenSeconds: number; computeSeconds: number }[] = [];
  let liveBytes: number[] = [];
  const times: number[] = [];
  for (let step = 0; step < WARMUP + TRACED; step++) {
    const t0 = performance.now();
    await engine.step(data.batch(step));
    if (step < WARMUP) continue;
    times.push(performance.now() - t0);
    const last = engine.lastTimings!();
    liveBytes = last.map(({ program }) => program.liveBytes);
    const per = last.map(({ program, timings }) => overlapFromTimings(program, timings));
    if (sums.length === 0) sums = per.map(() => ({ commSeconds: 0, hiddenSeconds: 0, computeSeconds: 0 }));
    per.forEach((o, d) => {
      sums[d]!.commSeconds += o.commSeconds;
      sums[d]!.hiddenSeconds += o.hiddenSeconds;
      sums[d]!.computeSeconds += o.computeSeconds;
    });
  }
  const perDevice = sums.map((s) => ({ ...s, hiddenFraction: s.commSeconds > 0 ? s.hiddenSeconds / s.commSeconds : 0 }));
  return { perDevice, tracedStepMs: median(times), liveBytes, arenaBytes: engine.deviceMemoryBytes ?? [] };
}

/** The same measure on the plan's predicted action times (its simulation): per device (by rank), and overall. */
function predictedOverlap(plan: Plan): { perDevice: number[]; hiddenFraction: number; commMsPerStep: number } {
  const perDevice: number[] = new Array<number>(plan.predicted.peakMemoryBytes.length).fill(0);
  let comm = 0;
  let hidden = 0;
  for (const p of plan.programs) {
    const of = (stream: "compute" | "comm"): Interval[] => p.actions.filter((a) => a.stream === stream).map((a): Interval => [a.start, a.end]);
    const o = overlapOfIntervals(of("comm"), of("compute"));
    for (const r of p.ranks) perDevice[r] = o.hiddenFraction;
    comm += o.commSeconds * p.ranks.length;
    hidden += o.hiddenSeconds * p.ranks.length;
  }
  return { perDevice: perDevice.map((x) => round(x)), hiddenFraction: comm > 0 ? round(hidden / comm) : 0, commMsPerStep: round(comm * 1e3) };
}

const started = performance.now();
if (process.argv[2] === "--child") {
  await childFromArgs(process.argv.slice(2));
  process.exit(0);
}
const dir = mkdtempSync(join(tmpdir(), "fsm-bench-cluster-"));
const results = [];
try {
  const addon = snapshotAddon(dir);
  const plans = CASES.map((c) => ({ native: compile(c), one: compile({ ...c, name: "1 device", devices: 1, overrides: [...c.overrides.filter((o) => !/^parallel\.(shard|stages|data_parallel|chunks)=/.test(o)), "parallel.shard=none", "parallel.stages=1", "parallel.data_parallel=1", "parallel.chunks=1"] }) }));
  const files = plans.flatMap((p, i) =>
    (["native", "one"] as const).map((k) => {
      const file = join(dir, `${i}-${k}.json`);
      writeFileSync(file, JSON.stringify(p[k]));
      return { file, predictedStepSeconds: p[k].predicted.stepTimeSeconds };
    }),
  );
  const runs = stepsInChildren(fileURLToPath(import.meta.url), addon, files, ROUNDS, STEPS, (i) => `${CASES[i >> 1]!.model} ${CASES[i >> 1]!.name}${i % 2 ? " (its 1-device plan)" : ""}`);
  const stepMs = (i: number): number => median(runs[i]!.flatMap((r) => r.stepsMs));
  for (const [i, c] of CASES.entries()) {
    const plan = plans[i]!.native;
    const [native, one] = [stepMs(2 * i), stepMs(2 * i + 1)];
    // Against the memory plan (the model the search reasons with); the plan's own prediction is, where compile
    // laid them out, the runtime's arenas themselves.
    const predictedPeak = plan.predicted.peakMemoryBytes.map((_, r) => plan.memory[programOfRank(plan, r)!.program.id]!.arenaBytes);
    const { perDevice, tracedStepMs, liveBytes, arenaBytes: arena } = await overlap(plan);
    const ratios = arena.map((b, d) => b / predictedPeak[d]!);
    const comm = perDevice.reduce((n, o) => n + o.commSeconds, 0);
    const hidden = perDevice.reduce((n, o) => n + o.hiddenSeconds, 0);
    const s = plan.settings;
    results.push({
      model: c.model,
      case: c.name,
      devices: c.devices,
      settings: { stages: s.stages, dataParallel: s.dataParallel, shard: s.shard, schedule: s.schedule, microBatches: s.microBatches, microBatchSize: s.microBatchSize, batch: s.batch },
      stepMs: {
        native: round(native),
        oneDevice: round(one),
        nativeOverOneDevice: round(native / one),
        predicted: round(plan.predicted.stepTimeSeconds * 1e3),
        tracedNative: round(tracedStepMs),
      },
      memory: {
        arenaBytes: arena,
        liveBytes,
        predictedPeakBytes: predictedPeak,
        liveOverPredicted: liveBytes.map((b, d) => round(b / predictedPeak[d]!)),
        arenaOverPredicted: ratios.map((r) => round(r)),
        maxArenaOverPredicted: round(Math.max(...ratios)),
      },
      overlap: {
        tracedSteps: TRACED,
        perDevice: perDevice.map((o) => ({
          commMsPerStep: round((o.commSeconds / TRACED) * 1e3),
          computeMsPerStep: round((o.computeSeconds / TRACED) * 1e3),
          hiddenFraction: round(o.hiddenFraction),
        })),
        commMsPerStep: round((comm / TRACED) * 1e3),
        hiddenFraction: comm > 0 ? round(hidden / comm) : 0,
        predicted: predictedOverlap(plan),
      },
    });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(
  JSON.stringify({
    bench: "cluster",
    node: process.version,
    machine: { cores: cpus().length, cpu: cpus()[0]?.model ?? "unknown" },
    steps: { rounds: ROUNDS, recordedPerRound: `at least ${STEPS}, about 0.2 s`, tracedWarmup: WARMUP, traced: TRACED },
    note:
      "overlap.hiddenFraction: of the time a device's communication stream spent in comm.* instructions (union of their intervals, waits for peers included), the fraction during which the same device's compute stream was running a kernel; overall = summed hidden / summed comm over devices. 0 means communication was never overlapped (e.g. no comm, or every comm waits on the compute that feeds it); 1 means fully hidden. overlap.predicted applies the same measure to the plan's simulated action times (transfer time only, no waiting for peers). memory.arenaOverPredicted > 1: the native arena is larger than the plan's predicted per-device peak (liveOverPredicted: the same without the arena's fragmentation). All virtual devices share this machine's cores, so threads compete and times are not a real cluster's.",
    cases: results,
    totalSeconds: round((performance.now() - started) / 1e3, 1),
  }),
);
