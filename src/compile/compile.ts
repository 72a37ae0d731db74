// The compile pipeline in processing order: a checked model and a cluster → a validated, simulated Plan.
//   1 resolve settings (resolve.ts); whatever is `auto` (and the stage split) the plan search chooses
//     (src/search): the best candidate by predicted step time is planned; if its memory plan overflows, the
//     search runs again for less memory
//   2 training graph (src/passes: tensor-parallel split, when asked for, then autodiff); the search gets one
//     per tensor-parallel degree it may choose
//   3 layers → stages and ranks (stages.ts), what crosses each cut (boundaries.ts)
//   4 shard plan per stage (shard.ts → src/shard)
//   5 costs (stage-costs.ts) and the pipeline schedule (src/schedule buildSchedule: ordered, lowered, validated)
//   6 programs: pipeline actions, shard and tied collectives, optimizer waits, FSDP FREEs (programs.ts)
//   7 simulation: step time, bubble, exposed communication (simulate.ts on engine.ts)
//   8 memory plan: buffer lifetimes and static arena offsets (buffers.ts, memory.ts)
//   9 device fit (fit.ts); when it fails, the changes that fit (alternatives.ts)
//  10 the Plan document (assemble.ts), checked by the plan loader's validation and, as a schedule, by the
//     shared schedule validator (check-programs.ts) before it leaves
//  11 the arenas `fsm run` allocates, laid out by the runtime's own lowering (runtime-arenas.ts): the memory
//     the plan predicts per device
import type { CheckedModel } from "../check/check.js";
import { batchSplitRefusal } from "../check/batch-split.js";
import type { Calibration } from "../cost/calibration.js";
import { clusterFor, type Cluster } from "../cost/cluster.js";
import type { Graph } from "../graph/graph.js";
import type { TrainConfig } from "../check/settings-types.js";
import { buildTrainingGraph } from "../passes/autodiff.js";
import { splitForTensorParallel } from "../passes/tensor-parallel.js";
import { tensorParallelProblems } from "../graph/tensor-parallel-problems.js";
import type { Plan } from "../plan/plan.js";
import { PlanError } from "../plan/plan-error.js";
import { validatePlan } from "../plan/validate.js";
import { buildSchedule } from "../schedule/schedule.js";
import type { ShardPlan } from "../shard/types.js";
import { fittingAlternatives } from "./alternatives.js";
import { assemblePlan } from "./assemble.js";
import { findBoundaries } from "./boundaries.js";
import { programLifetimes } from "./buffers.js";
import { candidateSettings } from "./candidate-settings.js";
import { checkPrograms } from "./check-programs.js";
import { CompileError } from "./errors.js";
import { MemoryError, shortfall } from "./fit.js";
import { checkHeapRoom } from "./heap-room.js";
import { addReuseDependencies, layoutMemory, type ProgramMemory } from "./memory.js";
import { addReleaseDependencies } from "./release-dependencies.js";
import { layOutArenas, type ArenaMode } from "./runtime-arenas.js";
import type { Program, Rendezvous } from "./program.js";
import { buildPrograms } from "./programs.js";
import { autoSettings, resolveMesh, resolveSettings, sequenceParallelAt, trainSettings, type ResolvedSettings } from "./resolve.js";
import { candidateSets, candidateText } from "../search/candidate.js";
import { SearchError } from "../search/errors.js";
import { searchPlans, type SearchResult } from "../search/search.js";
import { optimalSplit } from "../search/split.js";
import type { PlanSearch } from "../plan/plan.js";
import { planShards } from "./shard.js";
import { predictStep, type StepPrediction } from "./simulate.js";
import { hostStepSeconds } from "../cost/calibrated-pricing.js";
import { StageCostModel } from "./stage-costs.js";
import { assignStages, type StageAssignment } from "./stages.js";

export interface CompileOptions {
  /** Device profile name (src/cost/cluster.ts). */
  readonly cluster: string;
  /** --devices: must agree with the parallel settings; derives stages or data_parallel when one is auto. */
  readonly devices?: number;
  readonly calibration?: Calibration;
  /** The .fsm path recorded in the plan. */
  readonly source: string;
  /** fsm's version recorded in the plan. */
  readonly fsmVersion: string;
  /** Step 11: lay out the runtime's arenas ("auto": plans within the default's budget). */
  readonly arenas?: ArenaMode;
}

/** Everything compile computed, for tests, benchmarks and reports; `plan` is what gets written. */
export interface Compiled {
  readonly plan: Plan;
  readonly settings: ResolvedSettings;
  readonly cluster: Cluster;
  readonly training: Graph;
  readonly stages: readonly StageAssignment[];
  readonly shards: readonly ShardPlan[];
  readonly programs: readonly Program[];
  readonly rendezvous: readonly Rendezvous[];
  readonly memory: readonly ProgramMemory[];
  readonly prediction: StepPrediction;
  readonly costs: StageCostModel;
  /** The search's record, when settings were auto. */
  readonly search?: SearchResult;
  /** Why step 11 did not lay out the runtime's arenas (the plan then predicts its memory plan's). */
  readonly arenasSkipped?: string;
  /** What the laid-out arenas' prediction leaves out (a GPU's reservations, without the addon). */
  readonly arenasNote?: string;
}

export function compileModel(model: CheckedModel, options: CompileOptions): Compiled {
  const compiled = compilePlan(model, options);
  // Which plan splits the batch is known only now (--devices, the search's choice of replicas and chunks).
  const refusal = model.sampleMixing && batchSplitRefusal(model.sampleMixing, compiled.settings.dataParallel, compiled.settings.microBatches);
  if (refusal) throw new CompileError(refusal);
  // What `fsm run` needs from the train section travels with the plan.
  const train = model.train!;
  const run = { steps: train.steps, seed: train.seed, ...(train.precision === "fp16" && { lossScale: train.lossScale }), data: train.data };
  return { ...compiled, plan: { ...compiled.plan, run } };
}

/** Step 11 on a compiled plan: the arenas `fsm run` allocates, which must fit the device as the memory plan
 *  did (a MemoryError otherwise, so the search plans for less memory as it does when a memory plan overflows). */
function withArenas(compiled: Compiled, mode: ArenaMode): Compiled {
  const laid = layOutArenas(compiled.plan, compiled.training, mode, compiled.cluster.profile);
  // The fit check of step 9 on the laid-out arenas (each program's fullest replica).
  const arenas = compiled.memory.map((m, p) => {
    const r = laid.plan.memory[p]!.runtime;
    return { ...m, arenaBytes: Math.max(...(r?.arenaBytes.map((a, i) => a + (r.reservedBytes?.[i] ?? 0)) ?? [0])) };
  });
  const short = shortfall(compiled.programs, arenas, compiled.cluster);
  if (short) throw new MemoryError(short, compiled.cluster.profile.name);
  return { ...compiled, plan: laid.plan, ...(laid.skipped !== undefined && { arenasSkipped: laid.skipped }), ...(laid.note !== undefined && { arenasNote: laid.note }) };
}

function compilePlan(model: CheckedModel, options: CompileOptions): Compiled {
  const train = model.train;
  if (!train) throw new CompileError(`model ${model.name} has no train section: a plan needs its batch, optimizer and precision`);
  checkHeapRoom(model.name, model.graph.ops().length);
  const parallel = model.parallel;
  const mesh = resolveMesh(parallel, options.devices);
  const rankTraining = (t: number): Graph => rankTrainingGraph(model, train, t);
  if (autoSettings(parallel, mesh).length > 0) return compileSearched(model.name, searchTrainings(model, options.cluster, options.devices), train, options);
  const resolved = resolveSettings(train, parallel, model.graph.layers().length, options.devices);
  const training = rankTraining(resolved.tensorParallel);
  // The split, when no balance is given, is the optimal one for these settings.
  const settings: ResolvedSettings = resolved.balance
    ? resolved
    : { ...resolved, balance: explicitSplit(training, resolved, clusterFor(options.cluster, resolved.devices, options.calibration), train) };
  try {
    return withArenas(compileResolved(model.name, training, settings, options), options.arenas ?? "auto");
  } catch (e) {
    if (!(e instanceof MemoryError)) throw e;
    const fits = fittingAlternatives(settings, training, (alt) => {
      try {
        const c = compileResolved(model.name, training, alt, options);
        return { fits: true, largestArena: Math.max(...c.memory.map((m) => m.arenaBytes)) };
      } catch (err) {
        if (err instanceof MemoryError) return { fits: false, largestArena: err.shortfall.neededBytes };
        throw err;
      }
    });
    throw new MemoryError(e.shortfall, e.profile, fits);
  }

  function compileSearched(name: string, trainings: ReadonlyMap<number, Graph>, train: TrainConfig, options: CompileOptions): Compiled {
    const devices = mesh.devices;
    if (devices === undefined) {
      throw new CompileError(`the plan search needs the number of devices: give --devices N (or parallel.devices, or both stages and data_parallel)`);
    }
    const cluster = clusterFor(options.cluster, devices, options.calibration);
    const base = trainSettings(train, parallel);
    const rejected: { text: string; reason: string }[] = [];
    // The search's memory model is an estimate; compile's memory plan is exact. When every finalist's memory
    // plan overflows, search again for the memory the estimates may use, scaled by how far they were off.
    let memoryScale = 1;
    for (let attempt = 0; attempt < 4; attempt++) {
      let result: SearchResult;
      try {
        result = searchPlans({ training: trainings.values().next().value!, tensorParallel: trainings, train, parallel, cluster, memoryScale });
      } catch (e) {
        if (e instanceof SearchError) throw new CompileError(rejected.length === 0 ? e.message : `${e.message} (after finalists whose memory plans did not fit: ${rejected.map((r) => `${r.text} (${r.reason})`).join("; ")})`);
        throw e;
      }
      // The best finalist is planned; if its memory plan overflows, the search runs again with the memory
      // it may plan for scaled by the overflow (cheaper than planning the other finalists, which share the
      // misestimate, and it may find a different kind of plan).
      const e = result.ranked[0]!;
      const plan = (x: typeof e): Compiled => {
        const training = trainings.get(x.candidate.tensorParallel)!;
        return compileResolved(name, training, candidateSettings({ ...base } as ResolvedSettings, x, sequenceParallelAt(parallel, x.candidate.tensorParallel, train.seq)), options);
      };
      try {
        const { compiled, chosen, passed } = verifiedFinalist(result, plan(e), plan, (c) => withArenas(c, options.arenas ?? "auto"));
        const search = planSearch(result, chosen, passed, compiled, memoryScale, rejected);
        return { ...compiled, plan: { ...compiled.plan, search }, search: result };
      } catch (err) {
        if (!(err instanceof MemoryError)) throw err;
        rejected.push({ text: candidateText(e.candidate), reason: `its memory plan needs ${(err.shortfall.neededBytes / 2 ** 30).toFixed(2)} GiB on program ${err.shortfall.program}` });
        memoryScale *= (0.98 * err.shortfall.availableBytes) / err.shortfall.neededBytes;
      }
    }
    throw new CompileError(
      `the plan search's finalists all fail their memory plans: ${rejected.map((r) => `${r.text} (${r.reason})`).join("; ")}; use more devices or a smaller batch`,
    );
  }
}

/** The training graph of one rank of a tensor-parallel group of t (t = 1: the model's own). */
function rankTrainingGraph(model: CheckedModel, train: TrainConfig, t: number): Graph {
  return buildTrainingGraph(splitForTensorParallel(model.graph, { degree: t, sequenceParallel: sequenceParallelAt(model.parallel, t, train.seq) }), train);
}

/** What the plan search is given: a rank's training graph for every tensor-parallel degree it may choose (the
 *  one the settings fix, or each that fits a node and splits the model). */
export function searchTrainings(model: CheckedModel, profile: string, devices: number | undefined): Map<number, Graph> {
  const train = model.train;
  if (!train) throw new CompileError(`model ${model.name} has no train section: a plan needs its batch, optimizer and precision`);
  const mesh = resolveMesh(model.parallel, devices);
  const degrees = mesh.tensorParallel !== undefined ? [mesh.tensorParallel] : tensorParallelDegrees(model.graph, profile, mesh.devices);
  return new Map(degrees.map((t) => [t, rankTrainingGraph(model, train, t)]));
}

/** The tensor-parallel degrees the search may choose: 1, and each degree that fits in one node, divides the
 *  devices, and splits the model (heads, key/value heads and vocabulary divide). */
function tensorParallelDegrees(forward: Graph, profile: string, devices: number | undefined): number[] {
  const perNode = clusterFor(profile, 1).profile.devicesPerNode;
  const out: number[] = [];
  for (let t = 1; t <= perNode; t++) {
    if (perNode % t !== 0 || (devices !== undefined && devices % t !== 0)) continue;
    if (tensorParallelProblems(forward, t).length === 0) out.push(t);
  }
  return out;
}

/** The optimal split of fully explicit settings; a split the stage pins forbid is the user's error. */
function explicitSplit(training: Graph, settings: ResolvedSettings, cluster: Cluster, train: TrainConfig): number[] {
  try {
    return optimalSplit(training, settings, cluster, train);
  } catch (e) {
    if (e instanceof SearchError) throw new CompileError(e.message);
    throw e;
  }
}

/** Finalists compiled besides the search's best at most (the compiled plans are the exact prediction). */
const VERIFIED_FINALISTS = 3;
/** How much slower than a later finalist's own prediction the compiled best may be before that one is
 *  compiled too. */
const VERIFY_SLACK = 1.03;

/**
 * The search ranks by its estimates; the compiled plan is exact (every transfer and collective on its stream,
 * FSDP's gathers where compute waits for them). When the best finalist compiles slower than the next one's
 * own prediction, that one is compiled too, up to VERIFIED_FINALISTS, and the fastest compiled plan is kept:
 * a misestimate costs compile time, not the plan. Only the kept plan is finished (`finish`: step 11, the
 * runtime's arenas, the costliest step of a deep model's compile); when its arenas do not fit, the next
 * fastest compiled plan is finished instead, and when none fits the first one's MemoryError is thrown.
 * Finalists passed over are returned with why.
 */
export function verifiedFinalist(
  result: SearchResult,
  first: Compiled,
  plan: (e: SearchResult["ranked"][number]) => Compiled,
  finish: (c: Compiled) => Compiled = (c) => c,
): { compiled: Compiled; chosen: number; passed: { text: string; reason: string }[] } {
  const planned: { index: number; compiled: Compiled }[] = [{ index: 0, compiled: first }];
  const fastest = () => planned.reduce((a, b) => (b.compiled.prediction.stepTime < a.compiled.prediction.stepTime ? b : a));
  for (let i = 1; i < Math.min(VERIFIED_FINALISTS, result.ranked.length); i++) {
    const next = result.ranked[i]!;
    // The programs' makespan: a calibration's fixed host cost per step is in the compiled step, not the estimates.
    if (fastest().compiled.prediction.run.makespan <= VERIFY_SLACK * (next.simulated ?? next.estimate)) break;
    try {
      planned.push({ index: i, compiled: plan(next) });
    } catch (err) {
      if (!(err instanceof MemoryError)) throw err;
    }
  }
  const byTime = [...planned].sort((a, b) => a.compiled.prediction.stepTime - b.compiled.prediction.stepTime || a.index - b.index);
  let chosen: { index: number; compiled: Compiled } | undefined;
  // The finalists whose arenas did not fit, by index.
  const unfit = new Map<number, MemoryError>();
  for (const p of byTime) {
    try {
      chosen = { index: p.index, compiled: finish(p.compiled) };
      break;
    } catch (err) {
      if (!(err instanceof MemoryError)) throw err;
      unfit.set(p.index, err);
    }
  }
  // None fits: the best finalist's overflow is what the search is rerun for (compile names that finalist).
  if (!chosen) throw unfit.get(0) ?? unfit.values().next().value!;
  const time = (x: number) => `${x.toFixed(3)} s`;
  const passed = result.ranked.slice(0, chosen.index).map((x, i) => {
    const c = planned.find((p) => p.index === i);
    const predicted = x.simulated ?? x.estimate;
    return {
      text: candidateText(x.candidate),
      reason: !c
        ? `its memory plan does not fit`
        : unfit.has(i)
          ? `its compiled plan's arenas do not fit the device`
          : `its compiled plan predicts ${time(c.compiled.prediction.stepTime)} a step (the search's ${time(predicted)}); ${candidateText(result.ranked[chosen.index]!.candidate)} compiles to ${time(chosen.compiled.prediction.stepTime)}`,
    };
  });
  return { compiled: chosen.compiled, chosen: chosen.index, passed };
}

/** What the plan records of the search: the choice, the runners-up, why families lost, and the counts. */
function planSearch(
  result: SearchResult,
  chosen: number,
  rejected: readonly { text: string; reason: string }[],
  compiled: Compiled,
  memoryScale: number,
  earlier: readonly { text: string; reason: string }[],
): PlanSearch {
  return {
    chosen: candidateText(result.ranked[chosen]!.candidate),
    candidates: result.ranked.map((e, n) => ({
      settings: candidateText(e.candidate),
      set: candidateSets(e),
      balance: [...e.balance],
      recomputeLayers: [...e.recomputeLayers],
      estimatedStepSeconds: e.estimate,
      simulatedStepSeconds: e.simulated ?? null,
      estimatedMemoryBytes: e.memoryBytes,
      stageSeconds: [...e.stageSeconds],
      status: n < chosen ? "rejected" : n === chosen ? "chosen" : "alternative",
      ...(n < chosen && { reason: rejected[n]!.reason }),
    })),
    families: result.families.map((f) => ({ family: f.family, ...(f.best !== undefined && { bestStepSeconds: f.best }), ...(f.reason !== undefined && { reason: f.reason }) })),
    stats: { ...result.stats },
    plannedStepSeconds: compiled.prediction.stepTime,
    memoryScale,
    ...(earlier.length > 0 && { overflowed: earlier.map((r) => `${r.text}: ${r.reason}`) }),
    neighbors: result.neighbors(result.ranked[chosen]!.candidate),
  };
}

/** Steps 3–10 for settings already resolved. */
export function compileResolved(name: string, training: Graph, settings: ResolvedSettings, options: CompileOptions): Compiled {
  const cluster = clusterFor(options.cluster, settings.devices, options.calibration);
  const stages = assignStages(training, settings);
  const boundaries = findBoundaries(training, stages);
  const shards = planShards(training, stages, settings);
  const costs = new StageCostModel(training, stages, boundaries, cluster, settings, shards);
  const lowered = buildSchedule(
    {
      schedule: settings.schedule,
      ranks: settings.stages,
      microBatches: settings.microBatches,
      ...(settings.schedule === "interleaved" && { virtualStages: settings.virtualStages }),
      checkpoint: settings.checkpoint,
    },
    costs,
  );
  const built = buildPrograms(lowered, stages, shards, costs, cluster, settings);
  const { programs, rendezvous } = built;
  const prediction = predictStep(programs, rendezvous, hostStepSeconds(cluster));
  const memory = programs.map((prog, p) => {
    const m = layoutMemory(prog, p, programLifetimes(prog, p, shards, costs, built.lifetimes), prediction.run);
    addReuseDependencies(prog, m);
    addReleaseDependencies(prog, m, prediction.run.programs[p]!);
    return m;
  });
  const short = shortfall(programs, memory, cluster);
  if (short) throw new MemoryError(short, cluster.profile.name);
  const plan = assemblePlan({ fsmVersion: options.fsmVersion, model: { name, source: options.source }, cluster, settings, training, stages, boundaries, shards, programs, memory, prediction, costs });
  // What is written must load: the loader's checks on the way out catch a compiler bug before a user does.
  try {
    validatePlan(plan);
  } catch (e) {
    if (e instanceof PlanError) throw new Error(`internal: compile produced a plan the loader rejects: ${e.message}`);
    throw e;
  }
  // The programs must also pass the checks every schedule passes (pairing, group order, FREEs, no deadlock).
  checkPrograms(plan);
  return { plan, settings, cluster, training, stages, shards, programs, rendezvous, memory, prediction, costs };
}
