// FLOPs per training step of the sample transformers against Megatron-LM's analytic count (Narayanan et al.
// 2021, appendix): per token 6·N + 12·L·d·S for forward + backward, N = parameters that take part in matmuls.
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { costGraph } from "../../src/cost/graph-cost.js";

const root = resolve(import.meta.dirname, "../..");

function flopsPerToken(sample: string): { perToken: number; seq: number } {
  const r = checkFile(join(root, "samples", sample));
  const m = r.model!;
  const batch = m.train!.batch;
  const seq = m.train!.seq!;
  const cost = costGraph(m.graph, { cluster: clusterFor("cpu", 1), precision: m.train!.precision, bindings: { B: batch, S: seq } });
  let total = 0;
  for (const l of cost.layers) total += l.forwardFlops + l.backwardFlops.input + l.backwardFlops.weight;
  return { perToken: total / (batch * seq), seq };
}

/** Megatron-LM per-token count from the model's constants (written out here, independent of the cost code). */
function megatron(n: number, layers: number, d: number, seq: number): number {
  return 6 * n + 12 * layers * d * seq;
}

describe("FLOPs per step agree with Megatron-LM's analytic count within 1%", () => {
  it("gpt2-124m (tied wte counts as lm_head's weight; wpe is a lookup only)", () => {
    const [vocab, d, layers] = [50257, 768, 12];
    const n = layers * (3 * d * d + d * d + 4 * d * d + 4 * d * d) + vocab * d;
    const { perToken, seq } = flopsPerToken("gpt2-124m.fsm");
    const want = megatron(n, layers, d, seq);
    expect(Math.abs(perToken / want - 1)).toBeLessThan(0.01);
  });

  it("llama-7b (tok_embeddings is a lookup only; the untied output projection counts)", () => {
    const [vocab, d, layers, hidden] = [32000, 4096, 32, 11008];
    const n = layers * (3 * d * d + d * d + 3 * d * hidden) + vocab * d;
    const { perToken, seq } = flopsPerToken("llama-7b.fsm");
    const want = megatron(n, layers, d, seq);
    expect(Math.abs(perToken / want - 1)).toBeLessThan(0.01);
  });

  it("gpt3-175b", () => {
    const [vocab, d, layers] = [50257, 12288, 96];
    const n = layers * 12 * d * d + vocab * d;
    const { perToken, seq } = flopsPerToken("gpt3-175b.fsm");
    const want = megatron(n, layers, d, seq);
    expect(Math.abs(perToken / want - 1)).toBeLessThan(0.01);
  });
});
