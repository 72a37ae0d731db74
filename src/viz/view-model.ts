// Plan (+ a measured step) → ViewModel: pure and deterministic; every renderer draws from its result.
import type { Plan } from "../plan/plan.js";
import { parseAction } from "../schedule/action.js";
import { groupEdges, layerFacts, layerGroups, type LayerFacts } from "./layers.js";
import { measuredTimeline } from "./measured.js";
import { memoryCurves } from "./memory-curve.js";
import { shardGroups } from "./shard-map.js";
import { predictedTimeline } from "./timeline.js";
import type { MeasuredStep } from "./trace.js";
import type { Alternatives, StageRow, Summary, ViewModel } from "./view-types.js";

export interface ViewOptions {
  /** One step of a measured trace (trace.ts), drawn below the predicted one. */
  readonly measured?: MeasuredStep;
}

export function buildViewModel(plan: Plan, options: ViewOptions = {}): ViewModel {
  const facts = layerFacts(plan);
  const groups = layerGroups(plan, facts);
  const c = plan.cluster;
  return {
    title: `${plan.model.name} on ${c.profile} × ${c.devices}`,
    settings: settingsLine(plan),
    summary: summary(plan),
    stages: stageRows(plan, facts),
    layerGroups: groups,
    edges: groupEdges(plan, groups),
    shards: shardGroups(plan),
    predicted: predictedTimeline(plan),
    ...(options.measured && { measured: measuredTimeline(plan, options.measured) }),
    memory: memoryCurves(plan, facts),
    ...(plan.search && { alternatives: alternatives(plan) }),
  };
}

const plural = (n: number, word: string) => `${n} ${n === 1 ? word : word.endsWith("h") ? `${word}es` : `${word}s`}`;

function settingsLine(plan: Plan): string {
  const s = plan.settings;
  const virtual = s.virtualStages > 1 ? ` (${s.virtualStages} virtual each)` : "";
  const reshard = s.shard === "fsdp" ? ` (reshard after forward: ${s.reshardAfterForward})` : "";
  return (
    `${plural(s.stages, "pipeline stage")}${virtual} × ${s.dataParallel} data-parallel, ${s.schedule}, ` +
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
  };
}

function stageRows(plan: Plan, facts: readonly LayerFacts[]): StageRow[] {
  return plan.stages.map((st) => {
    const program = plan.programs.find((p) => p.stages.includes(st.index))!;
    const memory = plan.memory[program.id]!;
    let parameters = 0;
    let flops = 0;
    for (let l = st.layers[0]; l <= st.layers[1]; l++) {
      parameters += facts[l]!.parameters;
      flops += facts[l]!.flops;
    }
    let computeSeconds = 0;
    for (const id of program.streams.compute) {
      const a = program.actions[id]!;
      const parsed = parseAction(a.text);
      if (parsed.ok && parsed.action.stage === st.index) computeSeconds += a.end - a.start;
    }
    const state = plan.shard[st.index]!.stateBytes.map((b) => b.param + b.grad + b.optimizer);
    return {
      stage: st.index,
      pipeRank: st.pipeRank,
      layers: st.layers,
      firstLayer: plan.graph.layers[st.layers[0]]!.name,
      lastLayer: plan.graph.layers[st.layers[1]]!.name,
      ranks: st.ranks,
      parameters,
      flopsPerDevice: flops * plan.settings.microBatches,
      computeSeconds,
      arenaBytes: memory.arenaBytes,
      peakBytes: memory.peakBytes,
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
