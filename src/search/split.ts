// The stage split for settings given in full (the explicit path): the optimal split under the search's
// stage model, among those its memory model accepts, else the fastest regardless of memory (compile's
// memory plan then reports what does not fit, with the changes that would).
import type { CheckpointMode, TrainConfig } from "../check/settings-types.js";
import type { Cluster } from "../cost/cluster.js";
import type { Graph } from "../graph/graph.js";
import type { Candidate } from "./candidate.js";
import { SearchError } from "./errors.js";
import { LayerTable } from "./layer-table.js";
import { optimalPartition } from "./partition.js";
import { StageModel } from "./stage-model.js";
import { bucketCapBytes } from "../shard/buckets.js";

/** The explicit settings the split depends on: a candidate's, and the micro-batch and bucket sizes (compile's
 *  resolved settings are one, so the search needs no type of compile's). */
export interface SplitSettings extends Omit<Candidate, "checkpoint"> {
  readonly checkpoint: CheckpointMode;
  readonly microBatchSize: number;
  readonly bucketMB: number;
  readonly fsdpPrefetch?: number;
  readonly fsdpMinParams?: number;
}

/** Layers per (virtual) stage; a SearchError when no split honours the layers' stage pins. */
export function optimalSplit(training: Graph, s: SplitSettings, cluster: Cluster, train: Pick<TrainConfig, "precision" | "seq" | "optimizer" | "reduceDtype">): number[] {
  const table = new LayerTable(training, cluster, train.precision, train.seq);
  const candidate: Candidate = {
    stages: s.stages,
    dataParallel: s.dataParallel,
    tensorParallel: s.tensorParallel,
    virtualStages: s.virtualStages,
    microBatches: s.microBatches,
    schedule: s.schedule,
    shard: s.shard,
    reshardAfterForward: s.reshardAfterForward,
    shardGroup: s.shardGroup,
    noSync: s.noSync,
    checkpoint: s.checkpoint,
  };
  const model = new StageModel({ table, profile: table.at(s.microBatchSize), cluster, candidate, precision: train.precision, optimizer: train.optimizer, reduceDtype: train.reduceDtype, bucketBytes: bucketCapBytes(s.bucketMB), prefetch: s.fsdpPrefetch, fsdpMinParams: s.fsdpMinParams });
  const problem = { layers: table.count, stages: model.stageCount, stageTime: (k: number, i: number, j: number) => model.stageTime(k, i, j) };
  const split = optimalPartition({ ...problem, fits: (k, i, j) => model.fits(k, i, j) }) ?? optimalPartition({ ...problem, fits: (k, i, j) => table.pinsAllow(k, i, j) });
  if (!split) {
    const pinned = table.pins.map((p, l) => (p === undefined ? undefined : `${table.names[l]} → stage ${p}`)).filter((x) => x !== undefined);
    throw new SearchError(`no split of ${table.count} layers over ${model.stageCount} stages honours the stage pins ${pinned.join(", ")}`);
  }
  return [...split.sizes];
}
