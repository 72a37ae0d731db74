// bench/cost: time to build the training graph of GPT-3 175B and cost it (FLOPs per layer, activation memory,
// model state) on a 1024-GPU H100 cluster. Prints one JSON object; run with `node dist/bench/cost.js` after
// `npm run build`. Aim: well under a second for the whole estimate.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { clusterFor } from "../src/cost/cluster.js";
import { estimateModel } from "../src/cost/estimate.js";
import { costGraph } from "../src/cost/graph-cost.js";
import { buildTrainingGraph } from "../src/passes/autodiff.js";
import { medianMs } from "./timing.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");

const path = join(root, "samples", "gpt3-175b.fsm");
const model = checkFile(path).model;
if (!model?.train) throw new Error(`${path} failed to check or has no train section`);
const train = model.train;
const cluster = clusterFor("h100-sxm", 1024);
const bindings = { B: train.batch, S: train.seq! };

const training = buildTrainingGraph(model.graph, train);
const estimate = estimateModel(model, cluster);
const buildTrainingGraphMs = medianMs(() => buildTrainingGraph(model.graph, train), 5);
const costForwardGraphMs = medianMs(() => costGraph(model.graph, { cluster, precision: train.precision, bindings }), 5);
const estimateModelMs = medianMs(() => estimateModel(model, cluster), 5);

console.log(
  JSON.stringify(
    {
      bench: "cost",
      node: process.version,
      model: "gpt3-175b.fsm",
      cluster: `${cluster.profile.name} × ${cluster.devices}`,
      forwardOps: model.graph.ops().length,
      trainingOps: training.ops().length,
      parameters: estimate.parameters,
      flopsPerStep: estimate.flopsPerStep,
      checkAndBuildMs: medianMs(() => checkFile(path), 3),
      buildTrainingGraphMs,
      costForwardGraphMs,
      // The whole `fsm cost` estimate: training graph + per-op costs + activations + model state.
      estimateModelMs,
      aimMs: 1000,
      withinAim: estimateModelMs < 1000,
    },
    null,
    2,
  ),
);
