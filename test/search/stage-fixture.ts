// A model's layer table and micro-batch profile on a cluster, as the search's stage and step models take
// them, and a candidate and a stage model on them: the setup the hand-priced stage-model tests share.
import type { CheckedModel } from "../../src/check/check.js";
import type { Cluster } from "../../src/cost/cluster.js";
import { stateBytesPerParam } from "../../src/cost/memory.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import type { Candidate } from "../../src/search/candidate.js";
import { LayerTable } from "../../src/search/layer-table.js";
import { StageModel, type StageModelInput } from "../../src/search/stage-model.js";

export function stageFixture(model: CheckedModel, cluster: Cluster, microBatch: number) {
  const train = model.train!;
  const table = new LayerTable(buildTrainingGraph(model.graph, train), cluster, train.precision, train.seq);
  const profile = table.at(microBatch);
  return {
    train,
    table,
    profile,
    per: stateBytesPerParam(train.precision, train.optimizer, train.reduceDtype),
    L: table.count,
    /** The memory bandwidth the optimizer step is priced at. */
    bandwidth: cluster.profile.memory.bandwidth * cluster.profile.achievable.memory,
    /** The stage model of candidate c on this table (25 MB gradient buckets unless `more` says otherwise). */
    stageModel: (c: Candidate, more: Partial<StageModelInput> = {}) =>
      new StageModel({ table, profile, cluster, candidate: c, precision: train.precision, optimizer: train.optimizer, reduceDtype: train.reduceDtype, bucketBytes: 25 * 2 ** 20, ...more }),
  };
}

/** One stage, one replica, one micro-batch, nothing sharded or recomputed, with `over` on top. */
export function candidateOf(over: Partial<Candidate>): Candidate {
  return {
    stages: 1,
    dataParallel: 1,
    tensorParallel: 1,
    virtualStages: 1,
    microBatches: 1,
    schedule: "1f1b",
    shard: "none",
    reshardAfterForward: true,
    shardGroup: 1,
    noSync: false,
    checkpoint: "never",
    ...over,
  };
}
