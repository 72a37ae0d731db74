// Tensor-parallel plans on the native cluster (threads, the in-process communicator) against the 1-device
// plan of the same model and seed: every step's loss and the final weights (each rank's slices joined by
// their ParamSplit) within fp32 rtol 1e-5 after 10 Adam steps — alone, with pipelines, with FSDP over the
// replicas of each tensor rank, and with clipping (the norm counts a replicated parameter once per group).
import { describe, expect, it } from "vitest";
import type { Plan } from "../../src/plan/plan.js";
import { parity, type Overrides, type Sample } from "../support/plan-parity.js";

const tensorParallel = (o: Overrides) => (plan: Plan) => {
  expect(plan.settings.tensorParallel).toBe(o.tensor_parallel);
  expect(plan.settings.sequenceParallel ?? false).toBe(o.sequence_parallel === "true");
};

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
  for (const [name, o, devices] of cases) it(`${name} ${JSON.stringify(o)}`, () => parity(name, o, devices, tensorParallel(o)));
});
