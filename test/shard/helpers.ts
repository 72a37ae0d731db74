// Shared helpers for shard tests: sample models with their training graphs, and plan shortcuts (one stage, or
// every stage of a pipeline).
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile, type CheckedModel } from "../../src/check/check.js";
import type { ShardStrategy, TrainConfig } from "../../src/check/settings-types.js";
import type { Graph } from "../../src/graph/graph.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { buildShardPlan, groupRanks, type ShardSpec } from "../../src/shard/plan.js";
import type { LayerRange, ShardPlan } from "../../src/shard/types.js";

export const SAMPLES = ["mlp", "gpt-tiny", "gpt2-124m", "llama-7b", "gpt3-175b"] as const;
export type SampleName = (typeof SAMPLES)[number];

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const cache = new Map<string, { model: CheckedModel; train: TrainConfig; training: Graph }>();

export function sample(name: SampleName): { model: CheckedModel; train: TrainConfig; training: Graph } {
  const hit = cache.get(name);
  if (hit) return hit;
  const model = checkFile(join(root, "samples", `${name}.fsm`)).model;
  if (!model?.train) throw new Error(`sample ${name} failed to check or has no train section`);
  const entry = { model, train: model.train, training: buildTrainingGraph(model.graph, model.train) };
  cache.set(name, entry);
  return entry;
}

/** A single-stage plan of a sample over group ranks 0..n−1, with the sample's precision and optimizer. */
export function samplePlan(name: SampleName, strategy: ShardStrategy, n: number, extra: Partial<ShardSpec> = {}): ShardPlan {
  const s = sample(name);
  return buildShardPlan({ graph: s.training, strategy, precision: s.train.precision, reduceDtype: s.train.reduceDtype, optimizer: s.train.optimizer, ranks: groupRanks(n), ...extra });
}

export const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/** Layer ranges of `count` stages over `layers` layers, split evenly (the first layers mod count get one more). */
export function evenStages(layers: number, count: number): LayerRange[] {
  const base = Math.floor(layers / count);
  let start = 0;
  return Array.from({ length: count }, (_, k) => {
    const end = start + base + (k < layers % count ? 1 : 0);
    const r = { start, end };
    start = end;
    return r;
  });
}

/** Every stage's plan of a pipeline over a training graph: stage k's replicas are ranks k·n .. k·n + n − 1. */
export function pipelinePlans(
  training: Graph,
  train: TrainConfig,
  strategy: ShardStrategy,
  stages: readonly LayerRange[],
  n: number,
  extra: Partial<ShardSpec> = {},
): ShardPlan[] {
  return stages.map((_, k) =>
    buildShardPlan({
      graph: training,
      strategy,
      precision: train.precision,
      reduceDtype: train.reduceDtype,
      optimizer: train.optimizer,
      ranks: groupRanks(n, k * n),
      stage: k,
      pipeline: { stages },
      ...extra,
    }),
  );
}
