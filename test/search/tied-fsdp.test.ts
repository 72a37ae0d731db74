// FSDP and a tied weight (gpt-tiny's wte = lm_head) in the search's stage model: the weight is one member of
// the unit of the layer it is filed under (its declaring layer, wte's), so one stage gathers it once; a
// stage that reads it elsewhere (the head's, past a pipeline cut) keeps a replica in its own unit, which
// gathers and reduce-scatters those bytes too, besides the all-reduce of the replicas' gradients.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { collectiveTime, groupLink, intraNodeLink } from "../../src/cost/collectives.js";
import { root } from "../compile/helpers.js";
import { candidateOf, stageFixture } from "./stage-fixture.js";

describe("a tied weight under FSDP in the stage model", () => {
  const model = checkFile(`${root}/samples/gpt-tiny.fsm`).model!;
  const cluster = clusterFor("cpu", 4);
  const { table, per, L, stageModel } = stageFixture(model, cluster, 2);
  const tie = table.shared[0]!;
  const m = stageModel(candidateOf({ stages: 2, dataParallel: 2, microBatches: 2, shard: "fsdp", shardGroup: 2 }));

  it("is filed under the embedding's layer and read by the head's", () => {
    expect(table.shared.length).toBe(1);
    expect(tie.owner).toBe(0);
    expect(tie.layers).toEqual([0, L - 1]);
    // One unit holds it once: the units' parameters add up to the model's (every layer is the root here).
    const units = table.fsdpUnits();
    expect(units.params.reduce((a, b) => a + b, 0)).toBe(m.paramsIn(0, L));
  });

  it("a stage with the head but not the embedding pays the replica's share of its unit's collectives and the gradient all-reduce", () => {
    const link = intraNodeLink(cluster.profile);
    const share = (kind: "all_gather" | "reduce_scatter", bytes: number) => collectiveTime(kind, bytes, 2, link) - collectiveTime(kind, 0, 2, link);
    // Gathered for the forward and again for the backward, reduce-scattered once, every micro-batch.
    const replica = 2 * share("all_gather", tie.params * per.param) + share("reduce_scatter", tie.params * per.grad);
    const allReduce = collectiveTime("all_reduce", tie.params * per.grad, 2, groupLink(cluster, [0, cluster.devices - 1]));
    expect(replica).toBeGreaterThan(0);
    // Layers 3.. hold no unit's lead (the root is led by layer 0), so this is all the stage's collectives.
    expect(m.collectiveSeconds(1, 3, L)).toBeCloseTo(allReduce + replica, 15);
    // The stage holding the embedding holds the weight in its unit (the root, led by layer 0): the unit's own
    // collectives and the all-reduce, no replica's share.
    const unit = table.fsdpUnits().params[0]!;
    const own = 2 * collectiveTime("all_gather", unit * per.param, 2, link) + collectiveTime("reduce_scatter", unit * per.grad, 2, link);
    expect(m.collectiveSeconds(0, 0, 3)).toBeCloseTo(own + allReduce, 15);
    // One stage holding both: neither.
    expect(m.collectiveSeconds(0, 0, L)).toBeLessThan(m.collectiveSeconds(0, 0, 3) + m.collectiveSeconds(1, 3, L));
  });
});
