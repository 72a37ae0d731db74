// Tensor-parallel plans on the native cluster (threads, the in-process communicator) against the 1-device
// plan of the same model and seed: every step's loss and the final weights (each rank's slices joined by
// their ParamSplit) within fp32 rtol 1e-5 after 10 Adam steps — alone, with pipelines, with FSDP over the
// replicas of each tensor rank, and with clipping (the norm counts a replicated parameter once per group).
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { initParams } from "../../src/interp/init.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { lower } from "../../src/lower/lower.js";
import { createNativeCluster } from "../../src/native/binding.js";
import { feedBatch, meanLoss } from "../../src/runtime/cluster-step.js";
import { readParam, writeParams } from "../../src/lower/param-pieces.js";
import { samplePath, sets } from "../compile/helpers.js";
import { checkLlamaTiny } from "../support/llama-tiny.js";

type Overrides = Record<string, string | number>;
const adam = { "train.optimizer": "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)" };
const ONE = { stages: 1, data_parallel: 1, tensor_parallel: 1, shard: "none", chunks: 1, schedule: "1f1b", virtual_stages: 1, checkpoint: "never" };

type Sample = "mlp" | "gpt-tiny" | "llama-tiny";
const LLAMA_TRAIN = "train { batch = 4, seq = 8, optimizer = adamw(lr: 3e-3, eps: 1e-3, weight_decay: 0.1), clip_grad_norm = 0.5, precision = fp32, seed = 1, steps = 10, data = synthetic() }\n";

/** The parallel section of the tiny Llama (checked in memory, so its settings are written, not --set). */
function llamaParallel(o: Overrides): string {
  const entries = Object.entries(o).filter(([k]) => !k.includes("."));
  return `parallel { ${entries.map(([k, v]) => `${k} = ${v}`).join(", ")} }\n`;
}

function planFor(name: Sample, overrides: Overrides, devices: number): Plan {
  const model = (name === "llama-tiny" ? checkLlamaTiny(LLAMA_TRAIN + llamaParallel(overrides)) : checkFile(samplePath(name), { overrides: sets(overrides) })).model!;
  return compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
}

async function train(plan: Plan, steps: number): Promise<{ losses: number[]; params: Map<string, Float32Array>; calls: Record<string, number> }> {
  const graph = graphFromJson(plan.model.name, plan.graph);
  const program = lower(plan, graph);
  const cluster = createNativeCluster({ devices: program.devices, timeoutSeconds: 20 });
  // The whole model's parameters (initParams draws them whole for a rank's graph too); each rank gets its slice.
  const init = initParams(graph, 5, "f32");
  writeParams(cluster, program, (n) => init.get(n)!.data as Float32Array);
  const data = syntheticData(graph, { batch: plan.settings.batch, ...(plan.settings.seq !== null && { seq: plan.settings.seq }), seed: 3 });
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) {
    feedBatch(cluster, program, data.batch(s), plan.settings.microBatches, plan.settings.microBatchSize);
    await cluster.run();
    losses.push(meanLoss(cluster, program));
  }
  return { losses, params: new Map(graph.params().map((p) => [p.name, readParam(cluster, program, p.name)])), calls: cluster.communicatorCalls() };
}

const RTOL = 1e-5;
const ATOL = 1e-6;

async function parity(name: Sample, overrides: Overrides, devices: number, steps = 10): Promise<void> {
  const base = { ...(name === "gpt-tiny" && adam), ...overrides };
  const one = await train(planFor(name, { ...base, ...ONE }, 1), steps);
  const plan = planFor(name, base, devices);
  expect(plan.settings.tensorParallel).toBe(overrides.tensor_parallel);
  expect(plan.settings.sequenceParallel ?? false).toBe(overrides.sequence_parallel === "true");
  const many = await train(plan, steps);
  // The group's collectives really ran through the communicator.
  expect(many.calls.allReduce ?? 0).toBeGreaterThan(0);
  for (let s = 0; s < steps; s++) {
    const [got, want] = [many.losses[s]!, one.losses[s]!];
    expect(Math.abs(got - want), `step ${s + 1}: ${got} vs ${want}`).toBeLessThanOrEqual(ATOL + RTOL * Math.abs(want));
  }
  for (const [p, want] of one.params) {
    const got = many.params.get(p)!;
    expect(got.length, p).toBe(want.length);
    for (let i = 0; i < want.length; i++) {
      if (Math.abs(got[i]! - want[i]!) > ATOL + RTOL * Math.abs(want[i]!)) expect.fail(`${p}[${i}]: ${got[i]} vs ${want[i]} after ${steps} steps`);
    }
  }
}

describe("tensor-parallel plans on the native cluster equal the 1-device plan", () => {
  const cases: [Sample, Overrides, number][] = [
    // GQA (2 key/value heads, one per rank), rotary embeddings, RMSNorm, SwiGLU, an untied vocabulary-parallel
    // head, AdamW with clipping (eps 1e-3, as the gpt-tiny cases: Adam divides tiny gradients by their own
    // square roots, which with eps 1e-8 turns float rounding into differences above the tolerance).
    ["llama-tiny", { tensor_parallel: 2, stages: 1, data_parallel: 1, chunks: 2, shard: "none", checkpoint: "never" }, 2],
    ["llama-tiny", { tensor_parallel: 2, stages: 2, data_parallel: 1, chunks: 2, shard: "none", checkpoint: "never", schedule: "gpipe" }, 4],
    ["gpt-tiny", { tensor_parallel: 2, stages: 1, data_parallel: 1, chunks: 1, shard: "none", checkpoint: "never" }, 2],
    ["gpt-tiny", { tensor_parallel: 4, stages: 1, data_parallel: 1, chunks: 2, shard: "none", checkpoint: "never" }, 4],
    ["gpt-tiny", { tensor_parallel: 2, stages: 2, data_parallel: 1, chunks: 2, shard: "none", checkpoint: "never", schedule: "1f1b" }, 4],
    ["gpt-tiny", { tensor_parallel: 2, stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" }, 4],
    ["gpt-tiny", { tensor_parallel: 2, stages: 1, data_parallel: 2, chunks: 1, shard: "oss", checkpoint: "never" }, 4],
    ["mlp", { tensor_parallel: 2, stages: 1, data_parallel: 1, chunks: 2, shard: "none", checkpoint: "never", "train.clip_grad_norm": "0.05" }, 2],
    // Sequence parallelism: norms and the residual stream on half (a quarter) of the sequence.
    ["gpt-tiny", { tensor_parallel: 2, sequence_parallel: "true", stages: 1, data_parallel: 1, chunks: 2, shard: "none", checkpoint: "never" }, 2],
    ["gpt-tiny", { tensor_parallel: 4, sequence_parallel: "true", stages: 1, data_parallel: 1, chunks: 1, shard: "none", checkpoint: "never" }, 4],
    ["gpt-tiny", { tensor_parallel: 2, sequence_parallel: "true", stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never", schedule: "1f1b" }, 8],
    ["llama-tiny", { tensor_parallel: 2, sequence_parallel: "true", stages: 1, data_parallel: 2, chunks: 2, shard: "sddp", checkpoint: "never" }, 4],
  ];
  for (const [name, o, devices] of cases) it(`${name} ${JSON.stringify(o)}`, () => parity(name, o, devices));
});
