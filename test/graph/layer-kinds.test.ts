import { describe, expect, it } from "vitest";
import { clusterFor } from "../../src/cost/cluster.js";
import { costGraph, estimateOp } from "../../src/cost/graph-cost.js";
import { layerKinds } from "../../src/graph/layer-kinds.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { LLAMA_TINY } from "../support/llama-tiny.js";
import { checkSources, model } from "../check/helpers.js";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const SAMPLES = resolve(import.meta.dirname, "../../samples");
const TRAIN = `\ntrain { batch = 4, seq = 16, optimizer = adam(lr: 1e-3) }\n`;

/** The tiny Llama with `n` blocks, its training graph. */
function llama(n: number, blockText = (s: string) => s) {
  const lib = blockText(readFileSync(join(SAMPLES, "lib", "transformer.fsm"), "utf8"));
  const r = checkSources({ [join(SAMPLES, "llama-tiny.fsm")]: LLAMA_TINY.replace("n_layer = 2", `n_layer = ${n}`) + TRAIN, [join(SAMPLES, "lib", "transformer.fsm")]: lib });
  expect(r.diagnostics).toEqual([]);
  const m = r.model!;
  return buildTrainingGraph(m.graph, m.train!);
}

describe("layerKinds", () => {
  it("gives the repeated blocks one kind, represented by the first, and every other layer its own", () => {
    const g = llama(5);
    const { kindOf, representative, forwardOps } = layerKinds(g);
    const blocks = g.layers().filter((l) => l.name.startsWith("layers.")).map((l) => l.index);
    expect(blocks).toHaveLength(5);
    expect(new Set(blocks.map((l) => kindOf[l]))).toEqual(new Set([kindOf[blocks[0]!]]));
    expect(representative[kindOf[blocks[0]!]!]).toBe(blocks[0]);
    // The other layers (embedding, norm, head) differ from the blocks and from each other.
    const others = g.layers().filter((l) => !blocks.includes(l.index)).map((l) => kindOf[l.index]);
    expect(new Set(others).size).toBe(others.length);
    expect(others).not.toContain(kindOf[blocks[0]!]);
    // Forward ops only, in op order, the same count in every block.
    for (const l of blocks) {
      expect(forwardOps[l]!.every((id) => g.op(id).phase === "forward" && g.op(id).layer === l)).toBe(true);
      expect(forwardOps[l]!.length).toBe(forwardOps[blocks[0]!]!.length);
    }
  });

  it("is found again once the graph has grown", () => {
    const g = llama(2);
    const before = layerKinds(g);
    expect(layerKinds(g)).toBe(before);
    const l = g.addLayer("extra");
    g.addOp({ op: "relu", attrs: {}, inputs: [g.inputs()[0]!], outputTypes: [g.tensor(g.inputs()[0]!).type], scope: "extra", layer: l });
    const after = layerKinds(g);
    expect(after).not.toBe(before);
    expect(after.kindOf).toHaveLength(before.kindOf.length + 1);
  });

  it("keeps layers apart when an attribute or an operand type differs", () => {
    const r = checkSources({
      "/m.fsm": model(
        "  a = linear(4, 4)\n  b = linear(4, 4)\n  c = linear(4, 4, bias: false)\n  d = linear(4, 8)\n  e = linear(8, 4)\n  f = linear(4, 4)",
        "    return mse_loss(f(e(d(c(b(a(x)))))), y)",
      ),
    });
    expect(r.diagnostics).toEqual([]);
    const g = r.model!.graph;
    const kindOf = (name: string) => layerKinds(g).kindOf[g.layers().find((l) => l.name === name)!.index];
    expect(kindOf("b")).toBe(kindOf("a"));
    expect(kindOf("c")).not.toBe(kindOf("a")); // bias: false
    expect(kindOf("d")).not.toBe(kindOf("a")); // out 8
    expect(kindOf("e")).not.toBe(kindOf("a")); // reads f32[B, 8]
    expect(new Set(["a", "c", "d", "e"].map(kindOf)).size).toBe(4);
  });
});

describe("costGraph by kind of layer", () => {
  it("gives every forward op the estimate estimateOp gives it alone", () => {
    const g = llama(4);
    const options = { cluster: clusterFor("h100-sxm", 8), precision: "bf16" as const, bindings: { B: 2, S: 16 } };
    const cost = costGraph(g, options);
    const forward = g.ops().filter((o) => o.phase === "forward");
    expect(cost.ops.map((e) => e.op)).toEqual(forward.map((o) => o.id));
    for (const e of cost.ops) expect(e).toEqual(estimateOp(g, e.op, options));
  });
});
