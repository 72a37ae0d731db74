// bench/mpi: `fsm run PLAN` under Open MPI (the mpi communicator: in-process mailboxes inside a process, MPI
// between processes) against the same plan in one process (the in-process communicator) and against the
// 1-device plan, on this machine's CPUs. Two models: samples/gpt-tiny.fsm at train.batch=64, and a GPT of
// d_model 128, 4 layers, 4 heads, vocab 256, ctx 64, batch 16 × seq 64 (written below, importing
// samples/lib/transformer.fsm). Each on 4 devices as `fsdp pp=1 dp=4 chunks=2` and `fsdp pp=2 dp=2 chunks=2`
// (checkpoint=never), and on 1 device (shard=none, one micro-batch of the same global batch). Every run is a
// real `node bin/fsm.js run PLAN --json` child; per case:
//   - stepMs: the median of the per-step `seconds` of the --json step lines (process 0's, the first WARMUP steps
//     of each run skipped) of ROUNDS runs of STEPS steps each, as `mpirun -np 4` (one device per process: mpi4),
//     `mpirun -np 2` (2 processes × 2 devices: mpi2), plain `node bin/fsm.js run` (one process, 4 virtual
//     devices: inProcess4) and the 1-device plan (oneDevice), the four interleaved round by round;
//     vsInProcess4 and vsOneDevice are their ratios, taken within the same case since the machine is shared
//     and noisy; perRoundMs: each run's own median (how noisy it was); perProcessStepMs: each process's own
//     median in the last round's mpi runs (summary.processes[].measuredStepSeconds);
//   - losses: sameLosses is true when every run of the 4-device plan (mpi4, mpi2, inProcess4 of every round,
//     and the traced runs below over their steps) printed bit-identical losses (the mpi communicator is designed
//     to form every sum in the in-process one's order); the 1-device plan sums in another order, so against it
//     only the largest absolute loss difference (oneDeviceMaxAbsDiff) is shown;
//   - overlap: the 4-device plan run once more, TRACED steps with --trace, as mpi4, mpi2 and inProcess4. From
//     the Chrome trace (pid = device, tid 0 compute / tid 1 communication, one event per merged run of a plan
//     action, step 1 skipped as warm-up): per device the union of the communication-track events whose
//     args.kernels contain a `comm.*` op (commMsPerStep), the union of the compute-track events
//     (computeMsPerStep), and hiddenFraction = |comm ∩ compute| / |comm|; perProcess groups the devices by
//     process (process p runs devices p·N/P .. (p+1)·N/P-1), its fraction the summed hidden over summed comm;
//     overlap.predicted is the same measure on the plan's own predicted action times, per device (comm there
//     is transfer time, no waiting; a device whose comm the plan already leaves exposed, such as a first
//     pipeline stage waiting for the next stage's gradients, shows little hidden when measured too);
//   - bytes: bytes each process's communicator sent per step (summary.processes[].bytesSent of the last round's
//     mpi runs ÷ the steps run), in-process and between processes, against the plan's prediction (from its
//     programs' actions under the communicator's direct algorithms, see predictBytes) and their ratio
//     (measured / predicted; 1 means every byte is accounted for).
// All processes and threads share this machine's cores (Open MPI binds -np 2 one process per core and leaves
// the oversubscribed -np 4 unbound: see `bindings`), so the times say what the mpi communicator's scheduling
// and messaging cost against the in-process one, not how a cluster would scale. No timed assertions.
// Prints one JSON object; run with `npm run bench:mpi`.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { nativeBuildInfo } from "../src/native/binding.js";
import type { Plan } from "../src/plan/plan.js";
import { writePlan } from "../src/plan/serialize.js";
import { overlapOfIntervals, type Interval } from "../src/runtime/overlap.js";
import { actionFromText } from "../src/schedule/action.js";

const WARMUP = 2;
const STEPS = 20; // timed steps per run, WARMUP of them skipped
const ROUNDS = 2; // timed runs of each kind per case, interleaved
const TRACED = 6; // steps of each traced run; step 1 is skipped
const MPIRUN = ["--allow-run-as-root", "--oversubscribe"];
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../.."); // dist/bench/mpi.js → the repository
const BIN = join(ROOT, "bin/fsm.js");

const D128 = `// A GPT of d_model 128, 4 layers, 4 heads, vocab 256, ctx 64 (bench/mpi.ts).
import "lib/transformer.fsm"

model gpt_d128 {
  const vocab = 256, ctx = 64, d = 128, heads = 4, n_layer = 4
  wte = embedding(vocab, d)
  wpe = embedding(ctx, d)
  layers = repeat(n_layer) GPTBlock(d, heads: heads)
  ln_f = layer_norm(d)
  lm_head = linear(d, vocab, bias: false, tie: wte.weight)

  forward(tokens: i32[B, S], targets: i32[B, S]) {
    h = wte(tokens) + wpe(positions(S))
    for layer in layers {
      h = layer(h)
    }
    return cross_entropy(lm_head(ln_f(h)), targets)
  }
}

train {
  batch = 16, seq = 64
  optimizer = adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-8)
  clip_grad_norm = 1.0
  precision = fp32
  seed = 1
  steps = 20
  data = synthetic()
}

parallel {
  devices = auto
  stages = auto, chunks = auto, schedule = 1f1b
  checkpoint = auto
  shard = auto
}
`;

const CONFIGS: readonly { name: string; overrides: string[] }[] = [
  { name: "fsdp pp=1 dp=4", overrides: ["parallel.shard=fsdp", "parallel.stages=1", "parallel.data_parallel=4", "parallel.chunks=2"] },
  { name: "fsdp pp=2 dp=2", overrides: ["parallel.shard=fsdp", "parallel.stages=2", "parallel.data_parallel=2", "parallel.chunks=2"] },
];
const ONE_DEVICE = ["parallel.shard=none", "parallel.stages=1", "parallel.data_parallel=1", "parallel.chunks=1"];

const round = (x: number, digits = 3): number => Number(x.toFixed(digits));
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function fail(error: string): never {
  console.log(JSON.stringify({ bench: "mpi", error }));
  process.exit(1);
}

// ---- compiling --------------------------------------------------------------------------------------------

function compile(file: string, source: string, devices: number, overrides: readonly string[], out: string): { plan: Plan; path: string } {
  const checked = checkFile(file, { overrides: [...overrides, "parallel.checkpoint=never"] });
  if (!checked.model) throw new Error(`${source} ${overrides.join(" ")}: ${checked.diagnostics.map((d) => d.message).join("; ")}`);
  const plan = compileModel(checked.model, { cluster: "cpu", devices, source, fsmVersion: "bench" }).plan;
  writePlan(out, plan);
  return { plan, path: out };
}

// ---- running ----------------------------------------------------------------------------------------------

interface ProcessSummary {
  readonly process: number;
  readonly ranks: readonly number[];
  readonly measuredStepSeconds: number;
  readonly bytesSent: { readonly inProcess: number; readonly betweenProcesses: number };
}
interface Run {
  readonly losses: number[];
  readonly seconds: number[];
  readonly steps: number;
  readonly processes?: readonly ProcessSummary[];
}

/** `[mpirun -np P] node bin/fsm.js run PLAN --json --steps N [--trace FILE]`; np undefined: no mpirun. */
function fsmRun(np: number | undefined, plan: string, steps: number, trace?: string): Run {
  const fsm = [BIN, "run", plan, "--json", "--steps", String(steps), ...(trace === undefined ? [] : ["--trace", trace])];
  const [cmd, args] = np === undefined ? [process.execPath, fsm] : ["mpirun", [...MPIRUN, "-np", String(np), process.execPath, ...fsm]];
  const r = spawnSync(cmd, args, { encoding: "utf8", cwd: ROOT, timeout: 240_000, maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: exit ${r.status ?? r.signal}: ${(r.stderr || r.stdout).slice(-2000)}`);
  const losses: number[] = [];
  const seconds: number[] = [];
  let summary: { steps: number; processes?: ProcessSummary[] } | undefined;
  for (const line of r.stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const o = JSON.parse(line) as { step?: number; loss?: number; seconds?: number; summary?: { steps: number; processes?: ProcessSummary[] } };
    if (o.summary) summary = o.summary;
    else if (o.step !== undefined) {
      losses.push(o.loss!);
      seconds.push(o.seconds!);
    }
  }
  if (!summary || losses.length !== steps) throw new Error(`${cmd} ${args.join(" ")}: ${losses.length} step lines of ${steps}, ${summary ? "a" : "no"} summary`);
  return { losses, seconds, steps: summary.steps, ...(summary.processes && { processes: summary.processes }) };
}

/** The median over runs' steps (each run's first WARMUP skipped), ms. */
const stepMs = (runs: readonly Run[]): number => median(runs.flatMap((r) => r.seconds.slice(WARMUP))) * 1e3;

// ---- overlap from a trace ----------------------------------------------------------------------------------

interface TraceEvent {
  readonly ph: string;
  readonly pid: number;
  readonly tid: number;
  readonly ts: number;
  readonly dur?: number;
  readonly args?: { readonly step?: number; readonly kernels?: string };
}

function traceOverlap(path: string, devices: number, processes: number) {
  const events = (JSON.parse(readFileSync(path, "utf8")) as { traceEvents: TraceEvent[] }).traceEvents;
  const comm: Interval[][] = Array.from({ length: devices }, () => []);
  const compute: Interval[][] = Array.from({ length: devices }, () => []);
  const steps = new Set<number>();
  for (const e of events) {
    if (e.ph !== "X" || (e.args?.step ?? 1) <= 1) continue;
    steps.add(e.args!.step!);
    const interval: Interval = [e.ts, e.ts + (e.dur ?? 0)]; // µs
    if (e.tid === 1 && (e.args?.kernels ?? "").split(" ").some((k) => k.startsWith("comm."))) comm[e.pid]!.push(interval);
    else if (e.tid === 0) compute[e.pid]!.push(interval);
  }
  const n = steps.size;
  const perDevice = comm.map((c, d) => overlapOfIntervals(c, compute[d]!));
  const per = Math.max(1, devices / processes);
  const perProcess = Array.from({ length: processes }, (_, p) => {
    const mine = perDevice.slice(p * per, (p + 1) * per);
    const c = mine.reduce((x, o) => x + o.commSeconds, 0);
    const h = mine.reduce((x, o) => x + o.hiddenSeconds, 0);
    return { process: p, devices: mine.map((_, i) => p * per + i), commMsPerStep: round(c / n / 1e3), hiddenFraction: c > 0 ? round(h / c) : 0 };
  });
  const c = perDevice.reduce((x, o) => x + o.commSeconds, 0);
  const h = perDevice.reduce((x, o) => x + o.hiddenSeconds, 0);
  return {
    stepsCounted: n,
    perDevice: perDevice.map((o) => ({ commMsPerStep: round(o.commSeconds / n / 1e3), computeMsPerStep: round(o.computeSeconds / n / 1e3), hiddenFraction: round(o.hiddenFraction) })),
    perProcess,
    hiddenFraction: c > 0 ? round(h / c) : 0,
  };
}

/** The same measure on the plan's predicted action times: per device (by rank), and over all devices. */
function predictedOverlap(plan: Plan): { perDevice: number[]; hiddenFraction: number } {
  const perDevice: number[] = new Array<number>(plan.cluster.devices).fill(0);
  let comm = 0;
  let hidden = 0;
  for (const p of plan.programs) {
    const of = (stream: "compute" | "comm"): Interval[] => p.actions.filter((a) => a.stream === stream).map((a): Interval => [a.start, a.end]);
    const o = overlapOfIntervals(of("comm"), of("compute"));
    for (const r of p.ranks) perDevice[r] = round(o.hiddenFraction);
    comm += o.commSeconds * p.ranks.length;
    hidden += o.hiddenSeconds * p.ranks.length;
  }
  return { perDevice, hiddenFraction: comm > 0 ? round(hidden / comm) : 0 };
}

// ---- predicted bytes ---------------------------------------------------------------------------------------

const sliceOf = (count: number, n: number, i: number): [number, number] => [Math.floor((count * i) / n), Math.floor((count * (i + 1)) / n)];
const DTYPE_BYTES: Readonly<Record<string, number>> = { f32: 4, i32: 4, bf16: 2, f16: 2 };

/** Elements of a plan tensor at the plan's micro-batch size (dims as text: `B`, `S`, `32`, `B*S`). */
function numel(plan: Plan, t: number): number {
  const s = plan.settings;
  return plan.graph.tensors[t]!.shape.reduce((n, dim) => {
    const size = dim.split("*").reduce((m, f) => {
      if (f === "B") return m * s.microBatchSize;
      if (f === "S" && s.seq !== null) return m * s.seq;
      if (/^\d+$/.test(f)) return m * Number(f);
      throw new Error(`tensor ${t}: cannot size dim '${dim}'`);
    }, 1);
    return n * size;
  }, 1);
}

/**
 * What every device sends per step, message by message ([from rank, to rank, bytes]), from the plan's programs:
 * each comm action of each replica (replica r of a program is program.ranks[r]) under the communicator's direct
 * algorithms (native/src/comm/mpi), buffers in fp32 words:
 *   ALL_GATHER / REDUCE_SCATTER of a full buffer B over n members: every member sends B/n to every other;
 *   ALL_REDUCE: member i sends slice j of the buffer to member j, then its summed slice i to every other
 *     (slices [⌊c·i/n⌋, ⌊c·(i+1)/n⌋) of c elements: 2·(n-1)/n·B per member on average, exact in total);
 *   BROADCAST: the root (action peer, absolute) sends B to every other member; REDUCE: every other member
 *     sends B to the root;
 *   SEND_F of stage k: stage k's boundary tensors (plan.stages[k].sends) of one micro-batch, to peer + r;
 *   SEND_B of stage k: a gradient of each of stage k-1's boundary tensors, same shapes (the plan has no list of
 *     them; the lowering derives them: src/lower/grad-routes.ts gradsBack), to peer + r.
 * Groups: `data` plan.shard[stage].ranks; `tied` replica r of each stage in plan.shard[stage].tied[unit].stages;
 * `world` every rank. `check` compares every SEND's bytes with the memory plan's comm buffers it reads.
 */
function predictBytes(plan: Plan): { messages: [number, number, number][]; sendsMatchMemoryPlan: boolean; notes: string[] } {
  const messages: [number, number, number][] = [];
  const notes = new Set<string>();
  let sendsMatch = true;
  const world = Array.from({ length: plan.cluster.devices }, (_, i) => i);
  const tensorSize = plan.mesh.shape[2] ?? 1;
  const gradBytes = plan.settings.precision === "fp32" ? 4 : 2;
  for (const program of plan.programs) {
    const memory = plan.memory[program.id]!;
    program.ranks.forEach((me, r) => {
      for (const a of program.actions) {
        const act = actionFromText(a.text);
        if (act.kind === "SEND_F" || act.kind === "SEND_B") {
          const tensors = act.kind === "SEND_F" ? plan.stages[act.stage]!.sends : plan.stages[act.stage - 1]!.sends;
          const bytes = tensors.reduce((n, t) => n + numel(plan, t) * (act.kind === "SEND_F" ? DTYPE_BYTES[plan.graph.tensors[t]!.dtype] ?? 4 : gradBytes), 0);
          messages.push([me, act.peer! + r * tensorSize, bytes]);
          const buffers = memory.buffers.filter((b) => b.kind === "comm" && b.to === a.id).reduce((n, b) => n + b.bytes, 0);
          if (buffers !== bytes) sendsMatch = false;
          continue;
        }
        const c = a.collective;
        if (!c) continue;
        let group: number[];
        if (c.group === "data") group = [...plan.shard[act.stage]!.ranks];
        else if (c.group === "world") group = world;
        else {
          const tied = plan.shard[act.stage]!.tied.find((x) => x.unit === act.unit);
          if (!tied) throw new Error(`${a.text}: no tied weight ${act.unit} on stage ${act.stage}`);
          group = tied.stages.map((s) => plan.stages[s]!.ranks[r]!);
        }
        group.sort((x, y) => x - y);
        const n = group.length;
        const i = group.indexOf(me);
        if (i < 0) throw new Error(`${a.text}: rank ${me} is not in its group ${group.join(",")}`);
        if (c.bytes % 4 !== 0) notes.add(`${a.text}: ${c.bytes} bytes is not a whole number of fp32 words`);
        const count = c.bytes / 4;
        const others = group.filter((x) => x !== me);
        switch (act.kind) {
          case "ALL_GATHER":
          case "REDUCE_SCATTER":
            for (const to of others) messages.push([me, to, (count / n) * 4]);
            break;
          case "ALL_REDUCE": {
            const [lo, hi] = sliceOf(count, n, i);
            group.forEach((to, j) => {
              if (j === i) return;
              const [a0, b0] = sliceOf(count, n, j);
              messages.push([me, to, (b0 - a0 + (hi - lo)) * 4]);
            });
            break;
          }
          case "BROADCAST":
            if (me === act.peer) for (const to of others) messages.push([me, to, c.bytes]);
            break;
          case "REDUCE":
            if (me !== act.peer) messages.push([me, act.peer!, c.bytes]);
            break;
          default:
            notes.add(`${a.text}: a collective of kind ${act.kind}, not predicted`);
        }
      }
    });
  }
  if (plan.settings.precision !== "fp32") notes.add(`precision ${plan.settings.precision}: collective bytes are the plan's, p2p gradients assumed 16-bit`);
  return { messages, sendsMatchMemoryPlan: sendsMatch, notes: [...notes] };
}

/** Predicted bytes per step per process for P processes (contiguous blocks), in-process and between. */
function predictedPerProcess(messages: readonly [number, number, number][], devices: number, processes: number) {
  const per = devices / processes;
  const out = Array.from({ length: processes }, () => ({ inProcess: 0, betweenProcesses: 0 }));
  for (const [from, to, bytes] of messages) {
    const p = Math.floor(from / per);
    if (Math.floor(to / per) === p) out[p]!.inProcess += bytes;
    else out[p]!.betweenProcesses += bytes;
  }
  return out;
}

function bytesFigure(run: Run, messages: readonly [number, number, number][], devices: number, processes: number) {
  const predicted = predictedPerProcess(messages, devices, processes);
  const measured = (run.processes ?? []).map((p) => ({ inProcess: p.bytesSent.inProcess / run.steps, betweenProcesses: p.bytesSent.betweenProcesses / run.steps }));
  const sum = (xs: readonly { inProcess: number; betweenProcesses: number }[], k: "inProcess" | "betweenProcesses") => xs.reduce((n, x) => n + x[k], 0);
  const ratio = (m: number, p: number): number | null => (p > 0 ? round(m / p, 4) : m === 0 ? 1 : null);
  const mIn = sum(measured, "inProcess");
  const mOut = sum(measured, "betweenProcesses");
  const pIn = sum(predicted, "inProcess");
  const pOut = sum(predicted, "betweenProcesses");
  return {
    perProcess: predicted.map((p, i) => ({
      process: i,
      predicted: p,
      measured: measured[i] ?? null,
    })),
    totalPerStep: {
      predicted: { inProcess: pIn, betweenProcesses: pOut, all: pIn + pOut },
      measured: { inProcess: mIn, betweenProcesses: mOut, all: mIn + mOut },
      measuredOverPredicted: { inProcess: ratio(mIn, pIn), betweenProcesses: ratio(mOut, pOut), all: ratio(mIn + mOut, pIn + pOut) },
    },
  };
}

// ---- the bench ---------------------------------------------------------------------------------------------

const bindings = (np: number): string[] => {
  const r = spawnSync("mpirun", [...MPIRUN, "-np", String(np), "--report-bindings", "true"], { encoding: "utf8", timeout: 30_000 });
  const lines = `${r.stdout}${r.stderr}`
    .split("\n")
    .filter((l) => /MCW rank/.test(l))
    .map((l) => l.replace(/^\[[^\]]*\]\s*/, ""));
  return lines.length > 0 ? lines : ["not bound (mpirun reports no binding: oversubscribed)"];
};

if (spawnSync("mpirun", ["--version"], { encoding: "utf8" }).status !== 0) fail("mpirun not found: install Open MPI (apt-get install libopenmpi-dev openmpi-bin)");
if (nativeBuildInfo().mpi === null) fail("the native addon was built without MPI: rebuild it (npm run build:native) with Open MPI installed");

const started = performance.now();
const dir = mkdtempSync(join(tmpdir(), "fsm-bench-mpi-"));
try {
  mkdirSync(join(dir, "lib"));
  copyFileSync(join(ROOT, "samples/lib/transformer.fsm"), join(dir, "lib/transformer.fsm"));
  writeFileSync(join(dir, "gpt-d128.fsm"), D128);
  const MODELS = [
    { model: "gpt-tiny batch=64", file: join(ROOT, "samples/gpt-tiny.fsm"), source: "samples/gpt-tiny.fsm", overrides: ["train.batch=64"] },
    { model: "gpt d128 l4 h4 v256 b16 s64", file: join(dir, "gpt-d128.fsm"), source: "gpt-d128.fsm", overrides: [] as string[] },
  ];
  const cases = [];
  let k = 0;
  for (const m of MODELS) {
    const one = compile(m.file, m.source, 1, [...m.overrides, ...ONE_DEVICE], join(dir, `plan${k++}.json`));
    for (const c of CONFIGS) {
      const four = compile(m.file, m.source, 4, [...m.overrides, ...c.overrides], join(dir, `plan${k++}.json`));
      const N = four.plan.cluster.devices;
      // ROUNDS rounds of the four runs, interleaved, so that a slow spell of the shared machine falls on all.
      const rounds = Array.from({ length: ROUNDS }, () => ({
        mpi4: fsmRun(4, four.path, STEPS),
        mpi2: fsmRun(2, four.path, STEPS),
        inProcess4: fsmRun(undefined, four.path, STEPS),
        oneDevice: fsmRun(undefined, one.path, STEPS),
      }));
      const { mpi4, mpi2, inProcess4, oneDevice } = rounds[rounds.length - 1]!;
      const pooled = (kind: keyof (typeof rounds)[number]): number => stepMs(rounds.map((r) => r[kind]));
      const traced = ([["mpi4", 4], ["mpi2", 2], ["inProcess4", 1]] as const).map(([name, np]) => {
        const trace = join(dir, `trace${k}-${name}.json`);
        const run = fsmRun(np === 1 ? undefined : np, four.path, TRACED, trace);
        return { name, run, overlap: traceOverlap(trace, N, np) };
      });
      const ms = { mpi4: pooled("mpi4"), mpi2: pooled("mpi2"), inProcess4: pooled("inProcess4"), oneDevice: pooled("oneDevice") };
      const same = (a: readonly number[], b: readonly number[]): boolean => a.every((x, i) => Object.is(x, b[i]));
      const sameLosses =
        rounds.every((r) => same(r.mpi4.losses, inProcess4.losses) && same(r.mpi2.losses, inProcess4.losses) && same(r.inProcess4.losses, inProcess4.losses)) &&
        traced.every((t) => same(t.run.losses, inProcess4.losses.slice(0, TRACED)));
      const { messages, sendsMatchMemoryPlan, notes } = predictBytes(four.plan);
      const s = four.plan.settings;
      cases.push({
        model: m.model,
        case: c.name,
        devices: N,
        settings: { stages: s.stages, dataParallel: s.dataParallel, shard: s.shard, schedule: s.schedule, microBatches: s.microBatches, microBatchSize: s.microBatchSize, batch: s.batch, seq: s.seq, precision: s.precision },
        parameters: four.plan.model.parameters,
        stepMs: {
          mpi4: round(ms.mpi4),
          mpi2: round(ms.mpi2),
          inProcess4: round(ms.inProcess4),
          oneDevice: round(ms.oneDevice),
          predicted: round(four.plan.predicted.stepTimeSeconds * 1e3),
          vsInProcess4: { mpi4: round(ms.mpi4 / ms.inProcess4), mpi2: round(ms.mpi2 / ms.inProcess4), oneDevice: round(ms.oneDevice / ms.inProcess4) },
          vsOneDevice: { mpi4: round(ms.mpi4 / ms.oneDevice), mpi2: round(ms.mpi2 / ms.oneDevice), inProcess4: round(ms.inProcess4 / ms.oneDevice) },
          perRoundMs: Object.fromEntries((["mpi4", "mpi2", "inProcess4", "oneDevice"] as const).map((kind) => [kind, rounds.map((r) => round(stepMs([r[kind]])))])),
          perProcessStepMs: {
            mpi4: (mpi4.processes ?? []).map((p) => round(p.measuredStepSeconds * 1e3)),
            mpi2: (mpi2.processes ?? []).map((p) => round(p.measuredStepSeconds * 1e3)),
          },
        },
        losses: {
          sameLosses,
          finalLoss: inProcess4.losses[inProcess4.losses.length - 1],
          oneDeviceMaxAbsDiff: Number(Math.max(...inProcess4.losses.map((x, i) => Math.abs(x - oneDevice.losses[i]!))).toPrecision(3)),
        },
        overlap: { ...Object.fromEntries(traced.map((t) => [t.name, t.overlap])), predicted: predictedOverlap(four.plan) },
        bytes: {
          mpi4: bytesFigure(mpi4, messages, N, 4),
          mpi2: bytesFigure(mpi2, messages, N, 2),
          sendsMatchMemoryPlan,
          ...(notes.length > 0 && { notes }),
        },
      });
    }
  }
  console.log(
    JSON.stringify({
      bench: "mpi",
      node: process.version,
      machine: { cores: cpus().length, cpu: cpus()[0]?.model ?? "unknown" },
      mpirun: `mpirun ${MPIRUN.join(" ")} -np P node bin/fsm.js run PLAN --json --steps N`,
      bindings: { np2: bindings(2), np4: bindings(4) },
      steps: { timed: STEPS, rounds: ROUNDS, warmupSkipped: WARMUP, traced: TRACED, tracedSkipped: 1 },
      notes: [
        "stepMs: medians of process 0's per-step seconds pooled over the rounds; the ratios are within one case. All processes share this machine's cores, so mpi runs oversubscribe them (each process adds its MPI progress/listener thread and polling waits to the devices' compute and communication threads).",
        "sameLosses: bit-identical losses over every run of the 4-device plan (mpi4, mpi2, inProcess4 and the traced runs); the 1-device plan sums in another order (oneDeviceMaxAbsDiff).",
        "overlap: a comm-track trace event is one merged run of one plan action, so an action whose kernels are a comm.* op plus small kernels (fsm_add_inplace after a reduce-scatter, the gradient-norm's sum_squares before its all-reduce) counts whole as communication; comm time includes waiting for peers.",
        "bytes: the communicator counts 4 bytes per element it posts (point-to-point and collectives, in-process mailboxes and MPI alike); host exchanges of the run loop (losses, the per-process summary) are not counted. Predicted from the plan's actions as described in bench/mpi.ts predictBytes; SEND_B's gradient tensors are not listed by the plan (they are the lowering's gradsBack), taken as one gradient per boundary tensor of stage k-1, checked against the memory plan's comm buffers (sendsMatchMemoryPlan).",
      ],
      cases,
      totalSeconds: round((performance.now() - started) / 1e3, 1),
    }),
  );
} catch (e) {
  console.log(JSON.stringify({ bench: "mpi", error: (e as Error).message }));
  process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
