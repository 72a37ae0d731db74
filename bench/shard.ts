// bench/shard: time to build the shard plan of GPT-3 175B (one stage, all 96 layers) for data-parallel groups
// of 8 and 64 under each strategy, with the plan's headline figures, and the FSDP overlap model's run time;
// then every stage's plan of an 8-stage pipeline, whose first and last stage hold the tied embedding.
// Prints one JSON object; run with `node dist/bench/shard.js` after `npm run build`.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { SHARD_STRATEGIES } from "../src/check/settings-types.js";
import { clusterFor } from "../src/cost/cluster.js";
import { buildTrainingGraph } from "../src/passes/autodiff.js";
import { layerSecondsFromCost } from "../src/shard/layer-times.js";
import { simulateShardOverlap } from "../src/shard/overlap.js";
import { accumulationPasses } from "../src/shard/passes.js";
import { buildShardPlan, groupRanks } from "../src/shard/plan.js";
import { tiedGroups } from "../src/shard/tied-groups.js";
import type { LayerRange, ShardPlan } from "../src/shard/types.js";
import { medianMs } from "./timing.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");

const GB = 1e9;
const path = join(root, "samples", "gpt3-175b.fsm");
const model = checkFile(path).model;
if (!model?.train) throw new Error(`${path} failed to check or has no train section`);
const train = model.train;
const t0 = performance.now();
const training = buildTrainingGraph(model.graph, train);
const buildTrainingGraphMs = Number((performance.now() - t0).toFixed(2));
const MICRO_BATCHES = 8;

const runs = [8, 64].flatMap((dp) =>
  SHARD_STRATEGIES.map((strategy) => {
    const spec = { graph: training, strategy, precision: train.precision, reduceDtype: train.reduceDtype, optimizer: train.optimizer, ranks: groupRanks(dp) };
    let plan: ShardPlan | undefined;
    const buildMs = medianMs(() => (plan = buildShardPlan(spec)), 5);
    const p = plan!;
    const out: Record<string, unknown> = {
      dataParallel: dp,
      strategy,
      buildMs,
      collectives: p.collectives.length,
      gradBuckets: p.gradBuckets.length,
      broadcastBuckets: p.broadcastBuckets.length,
      units: p.units.length,
      maxModelStateGB: Number((p.memory.maxTotal / GB).toFixed(3)),
      zeroFormulaGB: Number((p.memory.zeroFormula / GB).toFixed(3)),
    };
    if (p.partition) {
      const c = p.partition.chosen;
      out.partition = {
        largestShardGB: Number((p.partition.largestShardBytes / GB).toFixed(3)),
        greedyLargestShardGB: Number((p.partition.greedyLargestShardBytes / GB).toFixed(3)),
        lowerBoundGB: Number(((c.lowerBound * p.partition.bytesPerElement) / GB).toFixed(3)),
        gainOverGreedyPct: Number((100 * (1 - c.largest / p.partition.greedy.largest)).toFixed(2)),
        provenOptimal: c.optimal,
        searchNodes: c.nodes,
      };
    }
    if (strategy === "fsdp") {
      // One replica's share of the global batch, in MICRO_BATCHES micro-batches of plain accumulation.
      const cluster = clusterFor("h100-sxm", dp);
      const mb = train.batch / (dp * MICRO_BATCHES);
      const layerSeconds = layerSecondsFromCost(training, p.layers, { cluster, precision: train.precision, bindings: { B: mb, S: train.seq! } });
      const o = { cluster, layerSeconds, passes: accumulationPasses(MICRO_BATCHES) };
      let report: ReturnType<typeof simulateShardOverlap> | undefined;
      const simulateMs = medianMs(() => (report = simulateShardOverlap(p, o)), 5);
      out.overlap = {
        microBatches: MICRO_BATCHES,
        microBatchSize: mb,
        simulateMs,
        timedCollectives: report!.collectives.length,
        stepSeconds: Number(report!.stepEnd.toFixed(4)),
        noCommStepSeconds: Number(report!.noCommStepEnd.toFixed(4)),
        commSeconds: Number(report!.commSeconds.toFixed(4)),
        exposedCommSeconds: Number(report!.exposedComm.toFixed(4)),
      };
    }
    return out;
  }),
);

// An even cut of the layers over PIPELINE_STAGES stages, each with a data-parallel group of 8.
const PIPELINE_STAGES = 8;
const PIPELINE_DP = 8;
const layerCount = training.layers().length;
const cut: LayerRange[] = Array.from({ length: PIPELINE_STAGES }, (_, k) => ({
  start: Math.floor((k * layerCount) / PIPELINE_STAGES),
  end: Math.floor(((k + 1) * layerCount) / PIPELINE_STAGES),
}));
const pipelined = SHARD_STRATEGIES.map((strategy) => {
  let plans: ShardPlan[] = [];
  const buildAllMs = medianMs(() => {
    plans = cut.map((_, stage) =>
      buildShardPlan({
        graph: training,
        strategy,
        precision: train.precision,
        reduceDtype: train.reduceDtype,
        optimizer: train.optimizer,
        ranks: groupRanks(PIPELINE_DP, stage * PIPELINE_DP),
        stage,
        pipeline: { stages: cut },
      }),
    );
  }, 3);
  const first = plans[0]!;
  const tied = first.tiedCollectives.map((c) => ({
    param: c.param,
    stages: c.stages,
    order: c.reduction?.order,
    perStep: c.at.microBatch === "each" ? MICRO_BATCHES : 1,
    gbEach: Number((c.bytes / GB).toFixed(3)),
    groupOfReplica0: tiedGroups(plans, c.param)[0],
  }));
  return {
    strategy,
    buildAllMs,
    tied,
    maxModelStateGBByStage: plans.map((p) => Number((p.memory.maxTotal / GB).toFixed(3))),
  };
});

console.log(
  JSON.stringify(
    {
      model: model.name,
      parameters: model.graph.parameterCount(),
      buildTrainingGraphMs,
      runs,
      pipeline: { stages: PIPELINE_STAGES, dataParallel: PIPELINE_DP, microBatches: MICRO_BATCHES, runs: pipelined },
    },
    null,
    2,
  ),
);
