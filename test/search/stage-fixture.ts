// A model's layer table and micro-batch profile on a cluster, as the search's stage and step models take
// them: the setup the hand-priced stage-model tests share.
import type { CheckedModel } from "../../src/check/check.js";
import type { Cluster } from "../../src/cost/cluster.js";
import { stateBytesPerParam } from "../../src/cost/memory.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { LayerTable } from "../../src/search/layer-table.js";

export function stageFixture(model: CheckedModel, cluster: Cluster, microBatch: number) {
  const train = model.train!;
  const table = new LayerTable(buildTrainingGraph(model.graph, train), cluster, train.precision, train.seq);
  return {
    train,
    table,
    profile: table.at(microBatch),
    per: stateBytesPerParam(train.precision, train.optimizer, train.reduceDtype),
    L: table.count,
    /** The memory bandwidth the optimizer step is priced at. */
    bandwidth: cluster.profile.memory.bandwidth * cluster.profile.achievable.memory,
  };
}
