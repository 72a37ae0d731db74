// Plan (+ a measured step) → ViewModel: pure and deterministic; every renderer draws from its result.
import type { Plan } from "../plan/plan.js";
import { fsdpSettingsText, summarizePlan } from "../plan/summary.js";
import { plural } from "./format.js";
import { groupEdges, layerFacts, layerGroups, type LayerFacts } from "./layers.js";
import { measuredTimeline } from "./measured.js";
import { memoryCurves } from "./memory-curve.js";
import { shardGroups } from "./shard-map.js";
import { tpSecondsOf } from "./tensor-collectives.js";
import { tensorDevices } from "./tensor-map.js";
import { predictedTimeline } from "./timeline.js";
import type { MeasuredStep } from "./trace.js";
import type { Alternatives, StageRow, Summary, Timeline, ViewModel } from "./view-types.js";

export interface ViewOptions {
  /** One step of a measured trace (trace.ts), drawn below the predicted one. */
  readonly measured?: MeasuredStep;
}

export function buildViewModel(plan: Plan, options: ViewOptions = {}): ViewModel {
  const facts = layerFacts(plan);
  const groups = layerGroups(plan, facts);
  const predicted = predictedTimeline(plan, tpSecondsOf(plan, facts));
  const c = plan.cluster;
  return {
    title: `${plan.model.name} on ${c.profile} × ${c.devices}`,
    settings: settingsLine(plan),
    summary: summary(plan),
    stages: stageRows(plan, facts, predicted),
    layerGroups: groups,
    edges: groupEdges(plan, groups),
    shards: shardGroups(plan, groups),
    predicted,
    ...(options.measured && { measured: measuredTimeline(plan, options.measured) }),
    memory: memoryCurves(plan, facts),
    ...(plan.search && { alternatives: alternatives(plan) }),
  };
}

function settingsLine(plan: Plan): string {
  const s = plan.settings;
  const virtual = s.virtualStages > 1 ? ` (${s.virtualStages} virtual each)` : "";
  const reshard = fsdpSettingsText(s);
  const tensor = s.tensorParallel > 1 ? ` × ${s.tensorParallel} tensor-parallel${s.sequenceParallel === true ? " (sequence parallel)" : ""}` : "";
  return (
    `${plural(s.stages, "pipeline stage")}${virtual} × ${s.dataParallel} data-parallel${tensor}, ${s.schedule}, ` +
    `${plural(s.microBatches, "micro-batch")} of ${s.microBatchSize} (batch ${s.batch}), checkpoint ${s.checkpoint}, ` +
    `shard ${s.shard}${reshard}, ${s.precision}, ${s.optimizer}`
  );
}

function summary(plan: Plan): Summary {
  const p = plan.predicted;
  let peakRank = 0;
  p.peakMemoryBytes.forEach((b, r) => {
    if (b > p.peakMemoryBytes[peakRank]!) peakRank = r;
  });
  return {
    model: plan.model.name,
    parameters: plan.model.parameters,
    profile: plan.cluster.profile,
    devices: plan.cluster.devices,
    nodes: plan.cluster.nodes,
    stepSeconds: p.stepTimeSeconds,
    bubbleFraction: p.bubbleFraction,
    exposedCommSeconds: p.exposedCommSeconds,
    peakMemoryBytes: p.peakMemoryBytes[peakRank] ?? 0,
    peakRank,
    capacityBytes: plan.cluster.memoryBytes,
    mfu: p.mfu,
    tokensPerSecond: p.tokensPerSecond,
    flopsPerStep: p.flopsPerStep,
    tensorParallel: plan.settings.tensorParallel,
  };
}

function stageRows(plan: Plan, facts: readonly LayerFacts[], predicted: Timeline): StageRow[] {
  // A stage's compute time: its blocks on its program's compute lane (the predicted timeline parsed them).
  const computeSeconds = plan.stages.map(() => 0);
  for (const row of predicted.rows) {
    for (const b of row.lanes[0].blocks) if (b.stage !== undefined) computeSeconds[b.stage] += b.end - b.start;
  }
  return summarizePlan(plan).stageLayers.map(({ stage, pipeRank, layers, firstLayer, lastLayer, ranks }) => {
    const memory = plan.memory[plan.programs.find((p) => p.stages.includes(stage))!.id]!;
    let parameters = 0;
    let flops = 0;
    for (let l = layers[0]; l <= layers[1]; l++) {
      parameters += facts[l]!.parameters;
      flops += facts[l]!.flops;
    }
    const state = plan.shard[stage]!.stateBytes.map((b) => b.param + b.grad + b.optimizer);
    return {
      stage,
      pipeRank,
      layers,
      firstLayer,
      lastLayer,
      ranks: tensorDevices(ranks, plan.settings.tensorParallel),
      parameters,
      flopsPerDevice: flops * plan.settings.microBatches,
      computeSeconds: computeSeconds[stage]!,
      arenaBytes: memory.arenaBytes,
      peakBytes: memory.peakBytes,
      ...(memory.runtime && { runArenaBytes: Math.max(...memory.runtime.arenaBytes) }),
      modelStateBytes: Math.max(0, ...state),
    };
  });
}

function alternatives(plan: Plan): Alternatives {
  const s = plan.search!;
  return {
    chosen: s.chosen,
    candidates: s.candidates.map((c) => ({
      settings: c.settings,
      status: c.status,
      stepSeconds: c.simulatedStepSeconds ?? c.estimatedStepSeconds,
      memoryBytes: c.estimatedMemoryBytes,
      ...(c.reason !== undefined && { reason: c.reason }),
    })),
    neighbors: s.neighbors,
    families: s.families,
  };
}
