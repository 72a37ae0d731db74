// Activation memory per micro-batch from the autodiff pass's saved tensors: the MLP sample by hand, and
// mixed precision halving a transformer block's saved bytes.
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { activationMemory } from "../../src/cost/activations.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";

const root = resolve(import.meta.dirname, "../..");

function activations(sample: string, precision: "fp32" | "bf16", bindings: { B: number; S?: number }) {
  const m = checkFile(join(root, "samples", sample)).model!;
  return activationMemory(buildTrainingGraph(m.graph, m.train!), bindings, precision);
}

describe("activation memory", () => {
  it("the MLP sample by hand (fp32, micro-batch 32)", () => {
    const a = activations("mlp.fsm", "fp32", { B: 32 });
    const KiB = 1024;
    // input_layer saves x [32, 32] for dW and its relu's [32, 64]; each hidden layer its relu's [32, 64] (its
    // linear's input is the previous relu's output, already counted); head saves pred and y [32, 8].
    expect(a.layers.map((l) => l.savedBytes)).toEqual([12 * KiB, 8 * KiB, 8 * KiB, 8 * KiB, 8 * KiB, 2 * KiB]);
    // Checkpointed, a layer keeps what enters it: x; the previous output; head: the last output and y.
    expect(a.layers.map((l) => l.boundaryBytes)).toEqual([4 * KiB, 8 * KiB, 8 * KiB, 8 * KiB, 8 * KiB, 9 * KiB]);
    expect(a.totalBytes).toBe(46 * KiB);
    // 45 KiB of boundaries + a hidden layer recomputed in full (its input and its relu's output, 16 KiB).
    expect(a.checkpointedBytes).toBe(61 * KiB);
  });

  it("bf16 mixed precision halves a block's saved activations", () => {
    const f32 = activations("gpt-tiny.fsm", "fp32", { B: 8, S: 16 });
    const b16 = activations("gpt-tiny.fsm", "bf16", { B: 8, S: 16 });
    const block = f32.layers.findIndex((l) => l.name === "layers.0");
    expect(f32.layers[block]!.savedBytes).toBeGreaterThan(0);
    expect(b16.layers[block]!.savedBytes).toBe(f32.layers[block]!.savedBytes / 2);
  });

  it("checkpointing a deep model keeps far less", () => {
    const a = activations("gpt2-124m.fsm", "bf16", { B: 1, S: 1024 });
    expect(a.checkpointedBytes).toBeLessThan(a.totalBytes / 2);
    expect(a.layers.reduce((n, l) => n + l.savedBytes, 0)).toBe(a.totalBytes);
  });
});
