// The short account of a plan that `fsm compile` prints (as text or --json): stages with their layers and
// devices, shard groups, micro-batches, schedule, and the predictions.
import { arenasLaidOut, type Plan, type PlanPrediction, type PlanSettings } from "./plan.js";

export interface StageSummary {
  readonly stage: number;
  readonly pipeRank: number;
  readonly layers: readonly [number, number];
  readonly firstLayer: string;
  readonly lastLayer: string;
  readonly ranks: readonly number[];
  readonly shardGroup: readonly number[];
  readonly peakMemoryBytes: number;
  readonly modelStateBytes: number;
  /** oss/sddp: largest optimizer-state shard, ours vs FairScale's greedy partition. */
  readonly partition?: { readonly largestShardBytes: number; readonly greedyLargestShardBytes: number };
}

export interface PlanSummary {
  readonly model: string;
  readonly cluster: string;
  readonly devices: number;
  readonly nodes: number;
  readonly stages: number;
  readonly virtualStages: number;
  readonly dataParallel: number;
  /** Ranks of each tensor-parallel group (1: none). */
  readonly tensorParallel: number;
  readonly sequenceParallel: boolean;
  readonly microbatches: number;
  readonly microBatchSize: number;
  readonly batch: number;
  readonly schedule: string;
  readonly checkpoint: string;
  readonly shard: string;
  readonly reshardAfterForward: boolean;
  /** fsdpSettingsText of the plan's settings. */
  readonly fsdp: string;
  readonly stageLayers: readonly StageSummary[];
  readonly programs: number;
  readonly predicted: PlanPrediction;
  /** What predicted.peakMemoryBytes is: the arenas `fsm run` allocates (laid out by compile), or the memory
   *  plan's arenas when compile did not lay them out. */
  readonly memoryFrom: "runtime arenas" | "memory plan";
  /** The memory plan's peaks (most bytes its buffers hold at once), least and most over the programs. */
  readonly memoryPlanPeakBytes: readonly [number, number];
  /** The most a device reserves besides its arena (a GPU's kernel scratch and cuBLAS workspace; 0: none). */
  readonly reservedBytes: number;
}

/** How an FSDP plan shards, for one line of text (empty for other strategies): resharding, the hybrid shard
 *  groups and no_sync. */
export function fsdpSettingsText(s: Pick<PlanSettings, "shard" | "reshardAfterForward" | "shardGroup" | "noSync" | "dataParallel">): string {
  if (s.shard !== "fsdp") return "";
  const parts = [`reshard after forward: ${s.reshardAfterForward}`];
  if (s.shardGroup !== undefined && s.shardGroup < s.dataParallel) parts.push(`hybrid: shard groups of ${s.shardGroup}, each shard on ${s.dataParallel / s.shardGroup} replicas`);
  if (s.noSync) parts.push("no_sync: one reduce-scatter per unit per step");
  return ` (${parts.join("; ")})`;
}

export function summarizePlan(plan: Plan): PlanSummary {
  const s = plan.settings;
  const layerName = (i: number) => plan.graph.layers[i]!.name;
  const programOf = new Map(plan.programs.map((p) => [p.pipeRank, p]));
  return {
    model: plan.model.name,
    cluster: plan.cluster.profile,
    devices: plan.cluster.devices,
    nodes: plan.cluster.nodes,
    stages: s.stages,
    virtualStages: s.virtualStages,
    dataParallel: s.dataParallel,
    tensorParallel: s.tensorParallel,
    sequenceParallel: s.sequenceParallel ?? false,
    microbatches: s.microBatches,
    microBatchSize: s.microBatchSize,
    batch: s.batch,
    schedule: s.schedule,
    checkpoint: s.checkpoint,
    shard: s.shard,
    reshardAfterForward: s.reshardAfterForward,
    fsdp: fsdpSettingsText(s),
    stageLayers: plan.stages.map((st) => {
      const first = st.ranks[0]!;
      return {
        stage: st.index,
        pipeRank: st.pipeRank,
        layers: st.layers,
        firstLayer: layerName(st.layers[0]),
        lastLayer: layerName(st.layers[1]),
        ranks: st.ranks,
        shardGroup: plan.shard[st.index]!.ranks,
        peakMemoryBytes: plan.predicted.peakMemoryBytes[first]!,
        modelStateBytes: programOf.get(st.pipeRank) ? plan.predicted.modelStateBytes[first]! : 0,
        ...(plan.shard[st.index]!.partition && { partition: plan.shard[st.index]!.partition }),
      };
    }),
    programs: plan.programs.length,
    predicted: plan.predicted,
    memoryFrom: arenasLaidOut(plan) ? "runtime arenas" : "memory plan",
    memoryPlanPeakBytes: [Math.min(...plan.memory.map((m) => m.peakBytes)), Math.max(...plan.memory.map((m) => m.peakBytes))],
    reservedBytes: Math.max(0, ...plan.memory.flatMap((m) => m.runtime?.reservedBytes ?? [])),
  };
}
