// Shared helpers for shard tests: sample models with their training graphs, and plan shortcuts.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile, type CheckedModel } from "../../src/check/check.js";
import type { ShardStrategy, TrainConfig } from "../../src/check/settings-types.js";
import type { Graph } from "../../src/graph/graph.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { buildShardPlan, groupRanks, type ShardSpec } from "../../src/shard/plan.js";
import type { ShardPlan } from "../../src/shard/types.js";

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
  return buildShardPlan({ graph: s.training, strategy, precision: s.train.precision, optimizer: s.train.optimizer, ranks: groupRanks(n), ...extra });
}

export const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
