// `fsm run`'s training loop over a plan: parameters initialized from the seed, the synthetic data the plan's
// train section names, one step per iteration on an engine (engines.ts), and a report per step.
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs";
import { dirname, isAbsolute, join } from "node:path";
import { syntheticData } from "../data/synthetic.js";
import { npyData } from "../data/npy.js";
import { DataError, tokenData } from "../data/tokens.js";
import { dataBytesRead } from "../data/file.js";
import type { Graph } from "../graph/graph.js";
import type { Batch } from "../interp/session.js";
import type { PlanRun } from "../plan/plan.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import { arenasLaidOut, type Plan } from "../plan/plan.js";
import { createHash } from "node:crypto";
import { createEngine, defaultEngine, EngineError, type Engine, type InjectedFault, type StepEngine } from "./engines.js";
import { StepModeChooser, type StepMode } from "./step-mode.js";
import type { DeviceKind } from "./device-choice.js";
import type { Resumed, RunFailure } from "./engine-types.js";
import type { TraceEvent } from "./trace.js";
import type { DeviceProgram } from "../lower/device-program.js";
import { sliceBatch } from "./reference-step.js";
import { processWorld, WorldError, type ProcessWorld } from "./world.js";

export type { Engine } from "./engines.js";

export class RunError extends Error {
  constructor(
    message: string,
    /** What failed, as data, when a device failed (the step filled in). */
    readonly failure?: RunFailure,
  ) {
    super(message);
  }
}

export interface StepReport {
  readonly step: number;
  readonly loss: number;
  readonly seconds: number;
  readonly tokensPerSecond: number;
  /** fp16: the loss scale the step ran with, and whether it was skipped (gradients overflowed). */
  readonly lossScale?: number;
  readonly skipped?: boolean;
}

export interface RunSummary {
  readonly engine: Engine;
  readonly steps: number;
  readonly firstLoss: number;
  readonly finalLoss: number;
  readonly seconds: number;
  readonly predictedStepSeconds: number;
  /** The median step time, the first step (warm-up) left out when there are others. */
  readonly measuredStepSeconds: number;
  /** How the run loop took its steps, once it had measured both ways (absent: the run ended first). */
  readonly stepMode?: StepMode;
  /** The native engines' arenas, all devices together, when the engine reports them. */
  readonly arenaBytes?: number;
  /** The plan's predicted peak per device, summed over devices: what arenaBytes compares with. */
  readonly predictedMemoryBytes: number;
  /** Per device: the bytes its arena holds (allocated and touched once; the native engine). */
  readonly peakMemoryBytes?: readonly number[];
  /** Per device: the plan's predicted memory (the arena compile laid out, when it did: plan.memory[p].runtime). */
  readonly predictedPeakMemoryBytes: readonly number[];
  /** Whether compile laid out the arenas the plan predicts (else they are its memory plan's). */
  readonly arenasFromPlan: boolean;
  /** Per device: the most bytes its program's memory plan holds at once (the model the search reasons with). */
  readonly memoryPlanPeakBytes: readonly number[];
  /** The run stopped early at a step boundary because it was asked to (stopRequested). */
  readonly interrupted?: boolean;
  /** Why, when a reason was given (a signal's name), on any process. */
  readonly stopReason?: string;
  /** Under mpirun: each process's devices (global ranks), their arenas, and its median step time. */
  readonly processes?: readonly ProcessFigures[];
}

export interface ProcessFigures {
  readonly process: number;
  readonly ranks: readonly number[];
  readonly arenaBytes: readonly number[];
  readonly measuredStepSeconds: number;
  /** Payload bytes its devices sent over the run, to devices of the same process and to other processes. */
  readonly bytesSent: { readonly inProcess: number; readonly betweenProcesses: number };
  /** Bytes it read from data files (its own rows; 0 for synthetic data). */
  readonly dataBytesRead: number;
}

export interface RunOptions {
  readonly steps?: number;
  readonly engine?: Engine;
  /** Record a Chrome trace of every step (native engine only); passed to onDone's engine. */
  readonly trace?: boolean;
  /** With `trace`: after every step, this process's devices' programs and the step's per-instruction timings
   *  (the native engine's lastTimings), with the step's wall-clock seconds (`fsm run --profile` adds them up). */
  readonly onTimings?: (step: number, devices: readonly { program: DeviceProgram; timings: Float64Array }[], seconds: number) => void;
  /** Told which engine runs, before the first step. */
  readonly onEngine?: (engine: Engine) => void;
  readonly onStep?: (r: StepReport) => void;
  /** Given the engine after the last step (its parameters, for tests) and, with `trace`, every device's trace
   *  events (every process's, on one time axis). */
  readonly onDone?: (engine: StepEngine, trace: TraceEvent[]) => void;
  /** Asked after every step: true stops the run there, at a step boundary (Ctrl-C). */
  readonly stopRequested?: () => boolean | StopReason;
  /** Save a checkpoint into `dir` every `every` steps (default: only at the end) and at the end. */
  readonly save?: { readonly dir: string; readonly every?: number };
  /** Continue from the checkpoint in this directory: its weights, optimizer state and data position. */
  readonly resume?: string;
  /** Told where a resume starts (after the checkpoint is loaded, before the first step). */
  readonly onResume?: (r: Resumed) => void;
  /** Start from these weights (a safetensors file of whole tensors by parameter path) instead of the seed's. */
  readonly init?: string;
  /** How long a device waits for its peers in a collective or a receive before the step fails (native engine;
   *  default 60 s), as torch.distributed's init_process_group timeout. */
  readonly timeoutSeconds?: number;
  /** Make one device fail on purpose (a test aid for failure handling; the native engine only). */
  readonly injectFault?: InjectedFault;
  /** This run's processes (default: mpirun's, or this process alone). */
  readonly world?: ProcessWorld;
  /** The device kind the plan's devices run on (native engine; default cpu). */
  readonly device?: DeviceKind;
}

/** The run's batches: synthetic, a token file or .npy files (relative paths are relative to the model's .fsm
 *  file, as imports are). */
interface RowSlice {
  readonly from: number;
  readonly count: number;
}

function openData(plan: Plan, graph: Graph, run: PlanRun): { batch(step: number, rows?: RowSlice): Batch; close?(): void } {
  const seq = plan.settings.seq;
  const d = run.data;
  if (d.kind === "synthetic") {
    // Generated whole (each row depends on the ones before it in the stream), then cut to the rows asked for.
    const synthetic = syntheticData(graph, { batch: plan.settings.batch, ...(seq !== null && { seq }), seed: run.seed });
    return { batch: (step, rows) => (rows ? sliceBatch(synthetic.batch(step), rows.from, rows.count) : synthetic.batch(step)) };
  }
  const resolve = (path: string): string => (isAbsolute(path) ? path : join(dirname(plan.model.source), path));
  try {
    if (d.kind === "npy") {
      const files = Object.fromEntries(Object.entries(d.files).map(([k, v]) => [k, resolve(v)]));
      return npyData(graph, files, { batch: plan.settings.batch, ...(seq !== null && { seq }), seed: run.seed });
    }
    if (seq === null) throw new RunError("token data needs a sequence length (train.seq)");
    return tokenData(graph, resolve(d.path), d.dtype, { batch: plan.settings.batch, seq, seed: run.seed });
  } catch (e) {
    if (e instanceof DataError) throw new RunError(e.message);
    throw e;
  }
}

/** --save DIR is checked before training, not discovered after it: a directory (made if missing) we can write. */
function prepareSaveDir(dir: string): void {
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new RunError(`--save ${dir}: not a directory`);
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (e) {
    throw new RunError(`--save ${dir}: cannot write there: ${(e as Error).message}`);
  }
}

/** The median step time of the run's second half (the first step left out at least): the first steps also pay
 *  for warming up (first touches of the arenas, thread start, the allocator and branch caches settling: a
 *  fresh executor's first ~15 sub-millisecond steps take 2–3× the later ones), which the plan's step time does
 *  not include. */
export function typicalStep(times: readonly number[]): number {
  const steady = (times.length > 1 ? times.slice(Math.max(1, Math.floor(times.length / 2))) : [...times]).sort((a, b) => a - b);
  const mid = steady.length >> 1;
  return steady.length % 2 === 1 ? steady[mid]! : (steady[mid - 1]! + steady[mid]!) / 2;
}

/** Why a run is asked to stop: the signals a launcher sends, ordered by how much they say (SIGTERM: the job is
 *  being ended, so every process reports it). */
export const STOP_REASONS = ["SIGINT", "SIGTERM"] as const;
export type StopReason = (typeof STOP_REASONS)[number];

/** A host exchange between processes that failed (a process died or is stuck) as the run's error. */
async function exchange<T>(what: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof WorldError) throw new RunError(`${what}: ${e.message}`);
    throw e;
  }
}

/** Before any work, on every process alike: the process count must divide the plan's devices. */
export function checkProcessCount(world: ProcessWorld, plan: Plan): void {
  try {
    world.localRanks(plan.cluster.devices);
  } catch (e) {
    if (e instanceof WorldError) throw new RunError(e.message);
    throw e;
  }
}

/** Every process must run the same plan (each loaded or compiled its own): their hashes are compared before
 *  any work, so a stale plan file on one machine is an error rather than a hang or wrong training. */
async function checkSamePlan(world: ProcessWorld, plan: Plan, timeoutSeconds: number): Promise<void> {
  // The search's report (how long it took, what it pruned) says how the plan was chosen, not what runs.
  const { search: _report, ...executable } = plan;
  const digest = createHash("sha256").update(JSON.stringify(executable)).digest();
  const mine = Float64Array.from({ length: 4 }, (_, i) => digest.readUInt32LE(4 * i));
  const all = await exchange("comparing the processes' plans", () => world.allGather(mine, timeoutSeconds));
  const differ = all.flatMap((h, p) => (h.every((x, i) => x === mine[i]) ? [] : [p]));
  if (differ.length > 0) {
    throw new RunError(`process ${world.rank}'s plan differs from process(es) ${differ.join(", ")}'s: every process must run the same plan (the same file, or a .fsm file compiled with the same settings)`);
  }
}

export async function runPlan(plan: Plan, options: RunOptions = {}): Promise<RunSummary> {
  const run = plan.run;
  if (!run) throw new RunError("the plan has no run section (it was written before `fsm run` existed): compile it again");
  const steps = options.steps ?? run.steps;
  if (!(Number.isInteger(steps) && steps >= 1)) throw new RunError(`steps must be a positive integer, got ${steps}`);
  if (options.save) prepareSaveDir(options.save.dir);
  let world: ProcessWorld;
  try {
    world = options.world ?? processWorld();
  } catch (e) {
    if (e instanceof WorldError) throw new RunError(e.message);
    throw e;
  }
  if (world.size > 1) {
    checkProcessCount(world, plan);
    await checkSamePlan(world, plan, options.timeoutSeconds ?? 60);
  }
  const graph = graphFromJson(plan.model.name, plan.graph);
  // The data first: a bad file is reported before any engine is built.
  const data = openData(plan, graph, run);
  try {
    return await train(plan, graph, data, steps, world, options);
  } finally {
    data.close?.();
  }
}

/** Every process's trace events on one time axis: each process's shifted by how much later than the first its
 *  own time 0 was (wall clocks; across machines as good as their synchronisation). */
async function mergedTrace(world: ProcessWorld, engine: StepEngine, timeoutSeconds: number): Promise<TraceEvent[]> {
  const mine = engine.trace?.() ?? [];
  if (world.size === 1) return mine;
  const payload = new TextEncoder().encode(JSON.stringify({ origin: engine.traceOrigin ?? 0, events: mine }));
  const all = (await exchange("gathering the trace", () => world.allGatherBytes(payload, timeoutSeconds))).map(
    (b) => JSON.parse(new TextDecoder().decode(b)) as { origin: number; events: TraceEvent[] },
  );
  const first = Math.min(...all.map((p) => p.origin));
  return all.flatMap((p) => p.events.map((e) => (e.ts === undefined ? e : { ...e, ts: e.ts + (p.origin - first) * 1e3 })));
}

async function train(plan: Plan, graph: Graph, data: ReturnType<typeof openData>, steps: number, world: ProcessWorld, options: RunOptions): Promise<RunSummary> {
  const engine = options.engine ?? defaultEngine(graph);
  const timeoutSeconds = options.timeoutSeconds ?? 60;
  let stepper: StepEngine;
  try {
    stepper = createEngine(engine, plan, graph, plan.run!.seed, {
      ...(options.trace !== undefined && { trace: options.trace }),
      ...(options.init !== undefined && { init: options.init }),
      ...(options.injectFault && { fault: options.injectFault }),
      ...(options.device !== undefined && { device: options.device }),
      timeoutSeconds,
      world,
    });
  } catch (e) {
    if (e instanceof EngineError) throw new RunError(e.message, e.failure);
    throw e;
  }
  options.onEngine?.(engine);
  if ((options.save || options.resume) && !stepper.checkpoint) throw new RunError(`checkpoints are saved and resumed by the native engine, not ${engine}`);
  let first = 0;
  if (options.resume !== undefined) {
    try {
      const resumed = stepper.checkpoint!.load(options.resume);
      first = resumed.step;
      options.onResume?.(resumed);
    } catch (e) {
      if (e instanceof EngineError) throw new RunError(e.message);
      throw e;
    }
  }
  const save = async (step: number): Promise<void> => {
    if (!options.save) return;
    try {
      await stepper.checkpoint!.save(options.save.dir, step);
    } catch (e) {
      // Disk full, permissions, a path that became a file: the previous checkpoint (if any) is still whole.
      if ((e as NodeJS.ErrnoException).code !== undefined) throw new RunError(`cannot write the checkpoint of step ${step} into ${options.save.dir}: ${(e as Error).message}`);
      if (e instanceof WorldError) throw new RunError(`the checkpoint of step ${step}: ${e.message}`);
      throw e;
    }
  };
  // Asked on every process, decided by all: one process stopping alone would leave the others waiting on it.
  // Codes: 0 go on, 1 stop, 2 + i stop for STOP_REASONS[i]; the largest wins.
  let stopReason: StopReason | undefined;
  const stopAgreed = async (): Promise<boolean> => {
    const asked = options.stopRequested?.() ?? false;
    const mine = asked === false ? 0 : asked === true ? 1 : 2 + STOP_REASONS.indexOf(asked);
    const all = world.size === 1 ? [Float64Array.of(mine)] : await exchange("agreeing whether to stop", () => world.allGather(Float64Array.of(mine), timeoutSeconds));
    const code = Math.max(...all.map((v) => v[0]!));
    if (code >= 2) stopReason = STOP_REASONS[code - 2];
    return code > 0;
  };
  const seq = plan.settings.seq;
  const tokens = plan.settings.batch * (seq ?? 1);
  const started = performance.now();
  let firstLoss = NaN;
  let finalLoss = NaN;
  let done = 0;
  const times: number[] = [];
  // Step i's batch (0-based) as data.batch makes it, or what it threw, so that the error is step i's own even
  // when the batch was made ahead, during step i − 1 (whose run must be awaited, not left to reject unheard).
  // Wrapped either way: a batch is keyed by the model's input names, which may be any name.
  const makeBatch = (i: number): { readonly batch: Batch } | { readonly thrown: unknown } => {
    try {
      return { batch: stepper.rows ? data.batch(i, stepper.rows) : data.batch(i) };
    } catch (e) {
      return { thrown: e };
    }
  };
  let next = makeBatch(first);
  // Overlapped or blocking steps, whichever measures faster here (in one process: a blocked step is its own,
  // and processes pick apart).
  const modes = new StepModeChooser(stepper.canBlock === true && world.size === 1);
  for (let step = 1; step <= steps; step++) {
    // Steps are numbered over the whole training run: a resumed run continues the count (and --save-every's).
    const global = first + step;
    const t0 = performance.now();
    let loss: number;
    try {
      const made = next;
      if ("thrown" in made) throw made.thrown;
      if (modes.mode() === "blocking") {
        loss = await stepper.step(made.batch, true);
        if (step < steps) next = makeBatch(global);
        // A turn of the event loop, where a signal (Ctrl-C, SIGTERM) is heard: a blocking step holds it.
        await new Promise((resolve) => setImmediate(resolve));
      } else {
        // The step copies its batch into the devices before its first await, so the next batch is made while
        // the devices run this one (a data loader's prefetch: the main thread is otherwise idle until the step
        // ends).
        const running = stepper.step(made.batch);
        if (step < steps) next = makeBatch(global);
        loss = await running;
      }
    } catch (e) {
      if (e instanceof EngineError) throw new RunError(`step ${global}: ${e.message}`, e.failure && { ...e.failure, step: global });
      if (e instanceof DataError) throw new RunError(`step ${global}: ${e.message}`);
      throw e;
    }
    const seconds = (performance.now() - t0) / 1000;
    modes.record(seconds);
    if (!Number.isFinite(loss)) throw new RunError(`step ${global}: the loss is ${loss}`);
    if (step === 1) firstLoss = loss;
    finalLoss = loss;
    times.push(seconds);
    if (options.trace && options.onTimings && stepper.lastTimings) options.onTimings(global, stepper.lastTimings(), seconds);
    options.onStep?.({ step: global, loss, seconds, tokensPerSecond: tokens / seconds, ...stepper.lastStep?.() });
    done = step;
    const stopping = step < steps && (await stopAgreed());
    if (step === steps || stopping || (options.save?.every !== undefined && global % options.save.every === 0)) await save(global);
    if (stopping) break;
  }
  const seconds = (performance.now() - started) / 1000;
  const traceEvents = options.trace ? await mergedTrace(world, stepper, timeoutSeconds) : [];
  options.onDone?.(stepper, traceEvents);
  const processes = world.size > 1 ? await processFigures(world, plan, stepper, typicalStep(times), timeoutSeconds) : undefined;
  return {
    engine,
    steps: done,
    firstLoss,
    finalLoss,
    seconds,
    predictedStepSeconds: plan.predicted.stepTimeSeconds,
    measuredStepSeconds: typicalStep(times),
    ...(modes.settled() !== undefined && { stepMode: modes.settled()! }),
    ...(stepper.memoryBytes !== undefined && { arenaBytes: stepper.memoryBytes }),
    predictedMemoryBytes: plan.predicted.peakMemoryBytes.reduce((a, b) => a + b, 0),
    ...(processes
      ? { arenaBytes: processes.flatMap((p) => p.arenaBytes).reduce((a, b) => a + b, 0), peakMemoryBytes: processes.flatMap((p) => p.arenaBytes), processes }
      : stepper.deviceMemoryBytes !== undefined && { peakMemoryBytes: stepper.deviceMemoryBytes }),
    predictedPeakMemoryBytes: plan.predicted.peakMemoryBytes,
    arenasFromPlan: arenasLaidOut(plan),
    memoryPlanPeakBytes: memoryPlanPeaks(plan),
    ...(done < steps && { interrupted: true, ...(stopReason && { stopReason }) }),
  };
}

function memoryPlanPeaks(plan: Plan): number[] {
  const out = new Array<number>(plan.cluster.devices).fill(0);
  plan.programs.forEach((p, i) => p.ranks.forEach((r) => (out[r] = plan.memory[i]!.peakBytes)));
  return out;
}

/** Every process's figures (as [step time, bytes sent in / between processes, data bytes read, arena per local
 *  device...]), in process order: their devices are
 *  contiguous blocks, so the arenas concatenated are every device's in rank order. */
async function processFigures(world: ProcessWorld, plan: Plan, stepper: StepEngine, stepSeconds: number, timeoutSeconds: number): Promise<ProcessFigures[]> {
  const sent = stepper.bytesSent?.() ?? { inProcess: 0, betweenProcesses: 0 };
  const mine = Float64Array.from([stepSeconds, sent.inProcess, sent.betweenProcesses, dataBytesRead(), ...(stepper.deviceMemoryBytes ?? [])]);
  const all = await exchange("gathering the processes' figures", () => world.allGather(mine, timeoutSeconds));
  const per = plan.cluster.devices / world.size;
  return all.map((v, p) => ({
    process: p,
    ranks: Array.from({ length: per }, (_, i) => p * per + i),
    arenaBytes: Array.from(v.subarray(4)),
    measuredStepSeconds: v[0]!,
    bytesSent: { inProcess: v[1]!, betweenProcesses: v[2]! },
    dataBytesRead: v[3]!,
  }));
}
