// The plan search: every candidate of the space (space.ts) gets a lower bound on its step time without a
// stage split (step-model.ts); candidates are visited in order of that bound, and each one visited gets its
// optimal split (partition.ts over stage-model.ts) and closed-form estimate. Once `keep` candidates are
// known, a candidate whose bound is no better than the keep-th best estimate cannot enter the kept set, and
// neither can any after it (the order is by bound): they are pruned without losing any candidate of the
// kept set. The kept candidates are then run through the pipeline simulator (src/schedule) and ranked by
// its step time (and their memory as the schedule really holds it). Compile plans the best; when its memory
// plan overflows, compile searches again with the memory the search may plan for scaled down by the overflow.
import type { ParallelConfig, TrainConfig } from "../check/settings-types.js";
import type { Cluster } from "../cost/cluster.js";
import type { DeviceProfile } from "../cost/profile.js";
import type { Graph } from "../graph/graph.js";
import { lower } from "../schedule/lower.js";
import { buildComputeOrder } from "../schedule/orders/build.js";
import { execute } from "../schedule/execute.js";
import { activationMemory } from "../schedule/memory.js";
import { actionSeconds } from "../schedule/simulate.js";
import { candidateText, familyText, type Candidate, type Evaluated } from "./candidate.js";
import { SearchError } from "./errors.js";
import { LayerTable, type MicroBatchTimes } from "./layer-table.js";
import { optimalPartition, stageBounds } from "./partition.js";
import { scheduleCostsFor } from "./schedule-costs.js";
import { searchSpace, shardGroups } from "./space.js";
import { blockLink, layerSeconds, StageModel, type LayerSeconds } from "./stage-model.js";
import { needsNormAllReduce, normSeconds } from "../cost/grad-norm.js";
import { modelStateBytes, stateBytesPerParam } from "../cost/memory.js";
import { bucketCapBytes } from "../shard/buckets.js";
import { estimateStep, lowerBound } from "./step-model.js";
import { plural } from "../format/units.js";

export interface SearchInput {
  /** The training graph (of one rank of a tensor-parallel group when parallel.tensor_parallel > 1). */
  readonly training: Graph;
  /** parallel.tensor_parallel = auto: the training graph of one rank for each degree the search may choose
   *  (the tensor-parallel pass's, 1 included); absent: `training` at the degree the settings give. */
  readonly tensorParallel?: ReadonlyMap<number, Graph>;
  readonly train: TrainConfig;
  readonly parallel: ParallelConfig;
  readonly cluster: Cluster;
  /** How many of the best estimates are simulated and offered (default 3). */
  readonly keep?: number;
  /** Fraction of device memory the search may plan for (default 1): compile lowers it when the memory plans
   *  of every finalist came out larger than the search's model of them. */
  readonly memoryScale?: number;
  /** false: evaluate every candidate (tests check that pruning loses nothing against this). */
  readonly prune?: boolean;
  /** Called with every evaluated candidate's bound and outcome (tests check the bound never exceeds the
   *  estimate). */
  readonly audit?: (c: Candidate, bound: number, outcome: Evaluated | "infeasible" | "duplicate") => void;
}

export interface FamilyOutcome {
  /** `pp=4 dp=16` */
  readonly family: string;
  /** Best estimate among its candidates, when one fits. */
  readonly best?: number;
  /** Why none of its candidates is in the running. */
  readonly reason?: string;
}

export interface SearchStats {
  /** Candidates in the space. */
  readonly candidates: number;
  /** Given a stage split and an estimate. */
  readonly evaluated: number;
  /** Shown unable to beat the kept plans: by the bound without a split, or by a split bounded to beat them. */
  readonly pruned: number;
  /** Evaluated but no split fits device memory. */
  readonly infeasible: number;
  /** Selective checkpointing that needs no recompute: the same plan as checkpoint = never. */
  readonly duplicates: number;
  readonly simulated: number;
  readonly seconds: number;
}

export interface SearchResult {
  /** Best first: simulated step time, then estimate. */
  readonly ranked: readonly Evaluated[];
  readonly families: readonly FamilyOutcome[];
  readonly stats: SearchStats;
  /** One-setting changes of a candidate, evaluated the same way (for `fsm explain`). */
  readonly neighbors: (c: Candidate) => Neighbor[];
}

/** The chosen plan with one setting changed: what that setting's other values would give. */
export interface Neighbor {
  readonly setting: "shard" | "reshard_after_forward" | "shard_group" | "no_sync" | "schedule" | "checkpoint" | "chunks";
  readonly value: string;
  readonly stepSeconds?: number;
  readonly memoryBytes?: number;
  /** Why it has no estimate (it does not fit). */
  readonly reason?: string;
}

/** Every one-setting change of `c` (chunks: half and double; shard_group: the other groups the space
 *  tries), for explanations. */
function alternativesOf(c: Candidate, batch: number, devicesPerNode: number): { setting: Neighbor["setting"]; value: string; candidate: Candidate }[] {
  const out: { setting: Neighbor["setting"]; value: string; candidate: Candidate }[] = [];
  for (const shard of ["none", "oss", "sddp", "fsdp"] as const) {
    // Another strategy, or FSDP from another: plain, reducing every micro-batch.
    if (shard !== c.shard) out.push({ setting: "shard", value: shard, candidate: { ...c, shard, reshardAfterForward: true, shardGroup: c.dataParallel, noSync: false } });
  }
  if (c.shard === "fsdp") {
    out.push({ setting: "reshard_after_forward", value: String(!c.reshardAfterForward), candidate: { ...c, reshardAfterForward: !c.reshardAfterForward } });
    for (const shardGroup of shardGroups(c.dataParallel, c.tensorParallel, devicesPerNode)) {
      if (shardGroup !== c.shardGroup) out.push({ setting: "shard_group", value: String(shardGroup), candidate: { ...c, shardGroup } });
    }
    out.push({ setting: "no_sync", value: String(!c.noSync), candidate: { ...c, noSync: !c.noSync } });
  }
  for (const [schedule, virtualStages] of [["gpipe", 1], ["1f1b", 1], ["zero_bubble", 1], ["interleaved", 2], ["interleaved", 4]] as const) {
    if (schedule === c.schedule && virtualStages === c.virtualStages) continue;
    out.push({ setting: "schedule", value: virtualStages > 1 ? `${schedule}(v=${virtualStages})` : schedule, candidate: { ...c, schedule, virtualStages } });
  }
  for (const checkpoint of ["never", "selective", "except_last", "always"] as const) {
    if (checkpoint !== c.checkpoint) out.push({ setting: "checkpoint", value: checkpoint, candidate: { ...c, checkpoint } });
  }
  for (const microBatches of [c.microBatches / 2, c.microBatches * 2]) {
    // One micro-batch has no no_sync of its own (the space searches it only with more).
    if (Number.isInteger(microBatches) && batch % (c.dataParallel * microBatches) === 0) out.push({ setting: "chunks", value: String(microBatches), candidate: { ...c, microBatches, noSync: c.noSync && microBatches > 1 } });
  }
  return out;
}

const gib = (n: number): string => `${(n / 2 ** 30).toFixed(1)} GiB`;

export function searchPlans(x: SearchInput): SearchResult {
  const started = performance.now();
  const keep = x.keep ?? 3;
  // Spares in case a finalist's simulated memory does not fit.
  const pool = keep + 3;
  const capacity = x.cluster.profile.memory.capacity * (x.memoryScale ?? 1);
  const devices = x.cluster.devices;
  // One layer table per tensor-parallel degree: a rank's graph is a different graph at each.
  const trainings = x.tensorParallel ?? new Map([[x.parallel.tensorParallel === "auto" ? 1 : x.parallel.tensorParallel, x.training]]);
  const tables = new Map([...trainings].map(([t, g]) => [t, { table: new LayerTable(g, x.cluster, x.train.precision, x.train.seq), params: g.parameterCount() }]));
  const tableOf = (c: Candidate): LayerTable => tables.get(c.tensorParallel)!.table;
  const layerCount = tables.values().next().value!.table.count;
  const devicesPerNode = x.cluster.profile.devicesPerNode;
  const space = searchSpace({ devices, tensorParallel: [...tables.keys()], devicesPerNode, batch: x.train.batch, layers: layerCount, parallel: x.parallel });
  const bandwidth = x.cluster.profile.memory.bandwidth * x.cluster.profile.achievable.memory;

  const perParam = stateBytesPerParam(x.train.precision, x.train.optimizer, x.train.reduceDtype);
  const word = perParam.param;
  const bucketBytes = bucketCapBytes(x.parallel.bucketMB);
  const microBatch = (c: Candidate): number => x.train.batch / (c.dataParallel * c.microBatches);
  // Layer seconds depend on the micro-batch size, the data-parallel degree and the sharding only: shared.
  const secondsCache = new Map<string, LayerSeconds>();
  const secondsOf = (c: Candidate): LayerSeconds => {
    const key = `${microBatch(c)}|${c.dataParallel}|${c.tensorParallel}|${c.shard}|${c.reshardAfterForward}|${c.shardGroup}|${c.noSync}`;
    let s = secondsCache.get(key);
    if (!s) {
      s = layerSeconds(tableOf(c), tableOf(c).times(microBatch(c)), x.cluster, c, perParam, bucketBytes, x.parallel.fsdpMinParams);
      secondsCache.set(key, s);
    }
    return s;
  };
  // Clipping's norm all-reduce depends on the mesh only (cost/grad-norm.ts): once per mesh and sharding.
  const normCache = new Map<string, number>();
  const normOf = (c: Candidate): number => {
    const key = `${c.stages}|${c.dataParallel}|${c.tensorParallel}|${c.shard}`;
    let n = normCache.get(key);
    if (n === undefined) {
      const devices = c.stages * c.dataParallel * c.tensorParallel;
      n = needsNormAllReduce({ clipGradNorm: x.train.clipGradNorm, devices, stages: c.stages, shard: c.shard, tensorParallel: c.tensorParallel }) ? normSeconds(x.cluster, c) : 0;
      normCache.set(key, n);
    }
    return n;
  };
  const modelOf = (c: Candidate): StageModel =>
    new StageModel(
      { table: tableOf(c), profile: tableOf(c).at(microBatch(c)), cluster: x.cluster, candidate: c, precision: x.train.precision, optimizer: x.train.optimizer, reduceDtype: x.train.reduceDtype, capacity, bucketBytes, prefetch: x.parallel.fsdpPrefetch, normSeconds: normOf(c), fsdpMinParams: x.parallel.fsdpMinParams },
      secondsOf(c),
    );
  // Sums over a profile's layers, once per profile (candidates share profiles by the thousand).
  const totals = new Map<MicroBatchTimes, { weightSeconds: number; forwardSeconds: number }>();
  const totalsOf = (profile: MicroBatchTimes) => {
    let t = totals.get(profile);
    if (!t) {
      t = { weightSeconds: profile.backwardWeight.reduce((a, w) => a + w, 0), forwardSeconds: profile.forward.reduce((a, f) => a + f, 0) };
      totals.set(profile, t);
    }
    return t;
  };
  const bounded = space.candidates.map((c) => {
    const { weightSeconds, forwardSeconds } = totalsOf(tableOf(c).times(microBatch(c)));
    const recomputeShare = c.checkpoint === "always" ? 1 : c.checkpoint === "except_last" ? (c.microBatches - 1) / c.microBatches : 0;
    const bound = lowerBound(c, {
      seconds: secondsOf(c),
      recomputeSeconds: recomputeShare * forwardSeconds,
      weightSeconds,
      dpLink: blockLink(x.cluster, 0, c.dataParallel, c.tensorParallel),
      word,
      totalParams: tables.get(c.tensorParallel)!.params,
      memoryBandwidth: bandwidth,
      precision: x.train.precision,
      optimizer: x.train.optimizer,
      reduceDtype: x.train.reduceDtype,
      bucketBytes,
      normSeconds: normOf(c),
    });
    return { c, bound, text: undefined as string | undefined };
  });
  // Ties broken by the candidate's text so the visiting order, hence the result, is deterministic (each text
  // made once: candidates that differ only in what the bound ignores tie by the thousand).
  const textOf = (e: (typeof bounded)[number]): string => (e.text ??= candidateText(e.c));
  bounded.sort((a, b) => a.bound - b.bound || (textOf(a) < textOf(b) ? -1 : 1));

  /** A candidate's optimal split and estimate; `infeasible` when no split fits, `duplicate` for selective
   *  checkpointing that recomputes nothing (that plan is checkpoint = never's). */
  /** The bottleneck of each checkpoint = never candidate's split, by its text, for its selective twin. */
  const neverBottleneck = new Map<string, number>();
  const evaluate = (c: Candidate, beat?: number): Evaluated | "infeasible" | "duplicate" | "outclassed" => {
    // Some stage holds at least an even share of the parameters, so at least that share's model state (and
    // under no_sync its unsharded gradient): when that alone exceeds a stage's memory, no split fits and the
    // partitioner need not look.
    const stageCount = c.stages * c.virtualStages;
    const share = Math.floor(tables.get(c.tensorParallel)!.params / stageCount);
    const held = modelStateBytes(share, c.shardGroup, c.shard, x.train.precision, x.train.optimizer, x.train.reduceDtype) + (c.noSync ? share * perParam.grad : 0);
    if (held > capacity / c.virtualStages) return "infeasible";
    const model = modelOf(c);
    // An estimate is at least m times the bottleneck (step-model.ts: the busiest device runs all its
    // micro-batches), so to come in at `beat` or under, the bottleneck must be at most beat / m (the margin
    // covers the rounding of that product).
    const outclass = beat === undefined ? Infinity : (beat / c.microBatches) * (1 + 1e-12);
    // Selective checkpointing recomputes only where a stage would not fit otherwise, so where checkpoint =
    // never has a split, selective's plan differs only by stages that recompute to fit: of use only when
    // that lowers the bottleneck below never's (else it is never's plan, or one recomputing for nothing).
    const twin = c.checkpoint === "selective" ? neverBottleneck.get(candidateText({ ...c, checkpoint: "never" })) ?? Infinity : Infinity;
    const below = Math.min(outclass, twin);
    const split = optimalPartition({
      layers: layerCount,
      stages: model.stageCount,
      stageTime: (k, i, j) => model.stageTime(k, i, j),
      fits: (k, i, j) => model.fits(k, i, j),
      ...(x.parallel.balance && { sizes: x.parallel.balance }),
      ...(below < Infinity && { below }),
    });
    if (!split) return below === Infinity ? "infeasible" : below === twin ? "duplicate" : "outclassed";
    if (c.checkpoint === "never") neverBottleneck.set(candidateText(c), split.bottleneck);
    const recompute = recomputeLayers(model, tableOf(c).classOf, split.sizes);
    if (c.checkpoint === "selective" && recompute.length === 0) return "duplicate";
    const est = estimateStep(c, model, split.sizes, bandwidth);
    return {
      candidate: c,
      balance: split.sizes,
      recomputeLayers: recompute,
      estimate: est.seconds,
      memoryBytes: peakMemory(model, split.sizes),
      bottleneck: split.bottleneck,
      stageSeconds: est.stageTimes,
    };
  };

  const best: Evaluated[] = [];
  const familyBest = new Map<string, number>();
  let evaluated = 0;
  let infeasible = 0;
  let pruned = 0;
  let outclassed = 0;
  let duplicates = 0;
  // The kept estimate a pruned candidate's bound could not beat (the worst of the pool when pruning began).
  let pruneThreshold: number | undefined;
  for (let n = 0; n < bounded.length; n++) {
    const { c, bound } = bounded[n]!;
    if (x.prune !== false && best.length >= pool && bound >= best[pool - 1]!.estimate) {
      pruned = bounded.length - n;
      pruneThreshold = best[pool - 1]!.estimate;
      break;
    }
    const family = familyText(c);
    // Once the pool is full, only a candidate that can beat its worst is of use: its split is bounded so.
    const outcome = evaluate(c, x.prune !== false && best.length >= pool ? best[pool - 1]!.estimate : undefined);
    if (outcome === "outclassed") {
      // Pruned too, by the same step-time argument, once the split showed the bottleneck cannot be low enough.
      outclassed++;
      continue;
    }
    evaluated++;
    x.audit?.(c, bound, outcome);
    if (outcome === "infeasible") {
      infeasible++;
      continue;
    }
    if (outcome === "duplicate") {
      duplicates++;
      continue;
    }
    const e = outcome;
    familyBest.set(family, Math.min(familyBest.get(family) ?? Infinity, e.estimate));
    insertSorted(best, e, pool);
  }

  // Finalists: the best estimates through the pipeline simulator, whose memory (the schedule's own count
  // of micro-batches and deferred W's held on each rank) must also fit; the first `keep` that do, and after
  // them every spare whose estimate is still below the slowest kept simulation: the closed form misses part
  // of a short pipeline's bubble (gpt-tiny on 8 H100s: pp=4 estimated at 218 µs simulates to 238, where
  // pp=1's 233 is exact), so a spare ranked below them by estimate can simulate faster.
  // (The slowest of the `keep` best simulated so far: a spare that simulates slower than them raises no bar.)
  const ranked: Evaluated[] = [];
  let overMemory = 0;
  let simulated = 0;
  for (const e of best) {
    if (ranked.length >= keep && !(e.estimate < ranked[keep - 1]!.simulated!)) break;
    const sim = simulateCandidate(e, modelOf(e.candidate), bandwidth, capacity);
    simulated++;
    if (sim === undefined) {
      overMemory++;
      continue;
    }
    ranked.push({ ...e, simulated: sim.seconds, memoryBytes: sim.memoryBytes });
    ranked.sort(byPrediction);
    ranked.length = Math.min(ranked.length, keep);
  }
  const familyMemory = new Map<string, { needed: number; text: string }>();
  // A family without a plan that fits: does even its least memory-hungry candidate (most sharding,
  // checkpointing and micro-batches) not fit, or were its fitting candidates pruned as slower?
  const thinnest = new Map<string, Candidate>();
  for (const c of space.candidates) {
    const family = familyText(c);
    const seen = thinnest.get(family);
    if (!familyBest.has(family) && (!seen || thinner(c, seen) < 0)) thinnest.set(family, c);
  }
  for (const [family, c] of thinnest) familyMemory.set(family, { needed: leastMemory(modelOf(c), x.parallel.balance), text: candidateText(c) });
  const familyBound = new Map<string, number>();
  for (const b of bounded) {
    const family = familyText(b.c);
    familyBound.set(family, Math.min(familyBound.get(family) ?? Infinity, b.bound));
  }
  const families = familyOutcomes(space.excluded, bounded.map((b) => b.c), familyBest, familyBound, familyMemory, capacity, x.cluster.profile, { pool, threshold: pruneThreshold });
  if (ranked.length === 0 && best.length > 0) {
    throw new SearchError(
      `the ${best.length} candidates with the best estimates for ${plural(devices, `${x.cluster.profile.name} device`)} fit by the stage model but not by the pipeline simulator's memory (e.g. ${candidateText(best[0]!.candidate)}); use more devices or a smaller batch`,
    );
  }
  if (ranked.length === 0) {
    const reasons = families.filter((f) => f.reason).map((f) => `${f.family}: ${f.reason}`);
    throw new SearchError(
      `no plan for ${plural(devices, `${x.cluster.profile.name} device`)} fits` + (reasons.length > 0 ? `: ${reasons.join("; ")}` : "") + "; use more devices or a smaller batch",
    );
  }
  const inSpace = new Set(space.candidates.map(candidateText));
  const neighbors = (chosen: Candidate): Neighbor[] =>
    alternativesOf(chosen, x.train.batch, devicesPerNode).flatMap(({ setting, value, candidate }): Neighbor[] => {
      if (!inSpace.has(candidateText(candidate))) return [];
      const e = evaluate(candidate);
      if (e === "duplicate" || e === "outclassed") return [];
      if (e !== "infeasible") return [{ setting, value, stepSeconds: e.estimate, memoryBytes: e.memoryBytes }];
      const needed = leastMemory(modelOf(candidate), x.parallel.balance);
      return [{ setting, value, reason: `does not fit: needs ${gib(needed)} on its fullest device at best, a device has ${gib(x.cluster.profile.memory.capacity)}` }];
    });
  return {
    ranked,
    families,
    neighbors,
    stats: { candidates: bounded.length, evaluated, pruned: pruned + outclassed, infeasible: infeasible + overMemory, duplicates, simulated, seconds: (performance.now() - started) / 1000 },
  };
}

const SHARD_ORDER = ["fsdp", "sddp", "oss", "none"];
const CHECKPOINT_ORDER = ["always", "except_last", "selective", "never"];

/** Negative when a is expected to need less memory than b. */
function thinner(a: Candidate, b: Candidate): number {
  return (
    SHARD_ORDER.indexOf(a.shard) - SHARD_ORDER.indexOf(b.shard) ||
    CHECKPOINT_ORDER.indexOf(a.checkpoint) - CHECKPOINT_ORDER.indexOf(b.checkpoint) ||
    b.microBatches - a.microBatches ||
    Number(a.reshardAfterForward === false) - Number(b.reshardAfterForward === false) ||
    b.shardGroup - a.shardGroup ||
    Number(a.noSync) - Number(b.noSync)
  );
}

/** Ranks finalists by simulated step time; within 0.1% (below the cost model's resolution) the one that
 *  needs less memory, then the simpler one, goes first (GPipe and 1F1B often tie on time, not on memory). */
function byPrediction(a: Evaluated, b: Evaluated): number {
  const ta = a.simulated!;
  const tb = b.simulated!;
  if (Math.abs(ta - tb) > 1e-3 * Math.min(ta, tb)) return ta - tb;
  return a.memoryBytes - b.memoryBytes || simplicity(a.candidate) - simplicity(b.candidate) || ta - tb;
}

/** Among equal predictions, the plan with less machinery: fewer stages, less sharding, less recompute
 *  (and FSDP plain before hybrid or no_sync). */
function simplicity(c: Candidate): number {
  const fsdpExtras = Number(c.shardGroup < c.dataParallel) + Number(c.noSync);
  return c.stages * 1000 + SHARD_ORDER.length - SHARD_ORDER.indexOf(c.shard) + fsdpExtras + (CHECKPOINT_ORDER.length - CHECKPOINT_ORDER.indexOf(c.checkpoint)) * 10;
}

function insertSorted(list: Evaluated[], e: Evaluated, keep: number): void {
  let at = list.length;
  while (at > 0 && (list[at - 1]!.estimate > e.estimate || (list[at - 1]!.estimate === e.estimate && simplicity(list[at - 1]!.candidate) > simplicity(e.candidate)))) at--;
  if (at >= keep) return;
  list.splice(at, 0, e);
  if (list.length > keep) list.pop();
}

/** Largest per-device bytes: a device's stages together (interleaved), selective recompute applied. */
function peakMemory(model: StageModel, sizes: readonly number[]): number {
  return Math.max(...model.perDeviceBytes(stageBounds(sizes), (k, i, j) => model.bytesWithRecompute(k, i, j)));
}

/** Layers selective checkpointing recomputes: in each stage, the first layers of each kind it takes. */
function recomputeLayers(model: StageModel, classOf: readonly number[], sizes: readonly number[]): number[] {
  const out: number[] = [];
  stageBounds(sizes).forEach(([i, j], k) => {
    const r = model.recompute(k, i, j);
    if (!r) return;
    const left = new Map(r.take);
    for (let l = i; l < j; l++) {
      const n = left.get(classOf[l]!) ?? 0;
      if (n > 0) {
        out.push(l);
        left.set(classOf[l]!, n - 1);
      }
    }
  });
  return out;
}

/** The smallest largest-stage memory any split reaches (the same partitioner, minimizing bytes). */
function leastMemory(model: StageModel, sizes: readonly number[] | undefined): number {
  const split = optimalPartition({
    layers: model.layers,
    stages: model.stageCount,
    stageTime: (k, i, j) => model.memoryBytes(k, i, j),
    fits: () => true,
    ...(sizes && { sizes }),
  });
  // Interleaved stages each get 1/v of a device: a device needs v times its fullest stage.
  return split ? split.bottleneck * model.virtualStages : Infinity;
}

/** The simulated step time and largest per-device memory of a finalist; undefined when the memory the
 *  schedule really holds (its own count of micro-batches and deferred W's per rank) does not fit. */
function simulateCandidate(e: Evaluated, model: StageModel, bandwidth: number, capacity: number): { seconds: number; memoryBytes: number } | undefined {
  const c = e.candidate;
  const costs = scheduleCostsFor(model, e.balance);
  // The orders are validated deadlock-free by the schedule tests for every shape, and the plan compile
  // emits is validated again; the search's finalists skip that check (it is a third of a simulation).
  const lowered = lower(
    buildComputeOrder({ schedule: c.schedule, ranks: c.stages, microBatches: c.microBatches, ...(c.schedule === "interleaved" && { virtualStages: c.virtualStages }), checkpoint: c.checkpoint === "selective" ? "never" : c.checkpoint }),
    { costs },
  );
  // simulate() without its second run (exposed communication), which the search does not use.
  const run = execute(lowered, (a) => actionSeconds(costs, a));
  if (!run.complete) throw new Error(`internal: the ${c.schedule} schedule deadlocks for ${candidateText(c)}`);
  const memory = activationMemory(lowered, run, costs);
  const fixed = model.perDeviceBytes(stageBounds(e.balance), (k, i, j) => model.stateBytes(i, j) + model.fixedActivationBytes(k, i, j));
  const memoryBytes = Math.max(...memory.perRank.map((r, rank) => fixed[rank]! + r.peakBytes));
  if (memoryBytes > capacity) return undefined;
  const est = estimateStep(c, model, e.balance, bandwidth);
  return { seconds: run.makespan + est.sync + est.optimizer, memoryBytes };
}

function familyOutcomes(
  excluded: readonly { family: string; reason: string }[],
  all: readonly Candidate[],
  best: ReadonlyMap<string, number>,
  bound: ReadonlyMap<string, number>,
  memory: ReadonlyMap<string, { needed: number; text: string }>,
  capacity: number,
  profile: DeviceProfile,
  pruning: { readonly pool: number; readonly threshold: number | undefined },
): FamilyOutcome[] {
  // `capacity` is what the search plans for (derated after an overflow); messages name the device's memory.
  const derated = capacity < profile.memory.capacity ? ` (the search plans for ${gib(capacity)} of it after a memory plan overflowed)` : "";
  const out: FamilyOutcome[] = excluded.map((x) => ({ family: x.family, reason: x.reason }));
  const families = [...new Set(all.map(familyText))];
  for (const family of families) {
    const b = best.get(family);
    if (b !== undefined) out.push({ family, best: b });
    else if (memory.has(family) && memory.get(family)!.needed > capacity) {
      const m = memory.get(family)!;
      out.push({ family, reason: `needs ${gib(m.needed)} on its fullest device at best (${m.text}), each ${profile.name} device has ${gib(profile.memory.capacity)}${derated}` });
    } else {
      // Both numbers are the search's own (a lower bound, and the step-model estimates it kept), not the
      // pipeline simulator's times printed beside them: a kept plan may simulate slower than this bound.
      const kept = pruning.threshold === undefined ? "" : `, and the search had already kept ${pruning.pool} plans estimated at ${pruning.threshold.toPrecision(4)} s or less`;
      out.push({ family, reason: `pruned: a lower bound on its step time is ${bound.get(family)!.toPrecision(4)} s${kept} (search estimates, not simulated times)` });
    }
  }
  const key = (f: string): number[] => f.match(/\d+/g)!.map(Number);
  return out.sort((a, b) => key(a.family)[0]! - key(b.family)[0]!);
}
