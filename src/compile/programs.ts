// Step 6 of compile: the programs. The pipeline alone is run once as the reference for ordering; shard
// collectives, tied all-reduces and the optimizer step's waits are then placed against it and merged into
// the comm streams (placer.ts explains the order and why it cannot deadlock). Last, each FSDP gather gets
// its FREE on the compute stream (frees.ts).
import type { Cluster } from "../cost/cluster.js";
import type { LoweredSchedule } from "../schedule/lowered.js";
import type { ShardPlan } from "../shard/types.js";
import { applyGradientReuse, keepBehind, placeAfterOptimizer, placeShardCollectives, stagedLifetimes } from "./collectives.js";
import { emitFrees } from "./frees.js";
import type { Lifetime } from "./lifetimes.js";
import { wireOptimizer } from "./optimizer-step.js";
import { pipelinePrograms } from "./pipeline.js";
import { Placer } from "./placer.js";
import type { Program, Rendezvous } from "./program.js";
import type { ResolvedSettings } from "./resolve.js";
import { runOrThrow } from "./simulate.js";
import type { StageCostModel } from "./stage-costs.js";
import type { StageAssignment } from "./stages.js";
import { placeTiedCollectives } from "./tied.js";

export interface BuiltPrograms {
  readonly programs: Program[];
  readonly rendezvous: Rendezvous[];
  /** Buffers the collectives introduced (gathered units, gradient staging). */
  readonly lifetimes: Lifetime[];
}

export function buildPrograms(
  lowered: LoweredSchedule,
  stages: readonly StageAssignment[],
  shards: readonly ShardPlan[],
  costs: StageCostModel,
  cluster: Cluster,
  settings: ResolvedSettings,
): BuiltPrograms {
  const { programs, rendezvous } = pipelinePrograms(lowered, stages, costs, settings, (s) => costs.optimizer(s));
  const reference = runOrThrow(programs, rendezvous, "pipeline schedule");
  const placer = new Placer(programs, rendezvous, reference);
  const programOf = (stage: number) => stages[stage]!.pipeRank;
  const placed = placeShardCollectives(placer, shards, cluster, programOf, settings.fsdpPrefetch);
  placeTiedCollectives(placer, shards, cluster, programOf, placed.placed, placed.gradients);
  keepBehind(placer, placed.followers);
  wireOptimizer(placer, placed.gradients, settings, cluster);
  placeAfterOptimizer(placer, placed.afterOptimizer, cluster);
  const lifetimes = [...placed.lifetimes, ...stagedLifetimes(placer, placed.staged, (stage) => costs.activations[stage]!.gradientsFrom)];
  placer.finish();
  applyGradientReuse(programs, rendezvous, placed.reuse);
  emitFrees(programs, lifetimes);
  return { programs, rendezvous, lifetimes };
}
