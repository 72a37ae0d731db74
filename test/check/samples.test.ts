// Every sample checks cleanly, and its parameter count equals an independent closed-form count.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { verifyGraph } from "../../src/graph/verify.js";

const samples = join(import.meta.dirname, "../../samples");

/** GPT-2/3 style: tied token embedding, learned positions, L pre-norm blocks (12d² + 13d each), final norm. */
function gptParams(vocab: number, ctx: number, d: number, layers: number): number {
  return vocab * d + ctx * d + layers * (12 * d * d + 13 * d) + 2 * d;
}

/**
 * Llama: untied embedding and head, L blocks of attention + 3·d·hidden SwiGLU + 2d norms, final norm. The
 * attention is 2d² for the query and output projections plus 2·d·(kvHeads·d/heads) for keys and values:
 * 4d² without grouped-query attention (kvHeads = heads).
 */
function llamaParams(vocab: number, d: number, layers: number, hidden: number, heads = 1, kvHeads = heads): number {
  const attention = 2 * d * d + 2 * d * ((kvHeads * d) / heads);
  return 2 * vocab * d + layers * (attention + 3 * d * hidden + 2 * d) + d;
}

const expected: Record<string, number> = {
  "mlp.fsm": 32 * 64 + 64 + 4 * (64 * 64 + 64) + 64 * 8 + 8,
  "gpt-tiny.fsm": gptParams(64, 16, 32, 2),
  "gpt2-124m.fsm": 124_439_808,
  "llama-7b.fsm": 6_738_415_616,
  "llama-70b.fsm": 68_976_648_192,
  "gpt3-175b.fsm": gptParams(51200, 2048, 12288, 96),
  "gpt-22b.fsm": gptParams(51200, 2048, 6144, 48),
};

describe("samples", () => {
  it("the closed forms agree with the published counts", () => {
    expect(gptParams(50257, 1024, 768, 12)).toBe(124_439_808);
    expect(llamaParams(32000, 4096, 32, 11008)).toBe(6_738_415_616);
    expect(llamaParams(32000, 4096, 32, 11008, 32, 32)).toBe(6_738_415_616);
    expect(llamaParams(32000, 8192, 80, 28672, 64, 8)).toBe(68_976_648_192);
  });

  it("every sample in samples/ is covered here", () => {
    const files = readdirSync(samples).filter((f) => f.endsWith(".fsm")).sort();
    expect(files).toEqual(Object.keys(expected).sort());
  });

  for (const [file, params] of Object.entries(expected)) {
    it(`${file} checks cleanly with ${params.toLocaleString("en-US")} parameters`, () => {
      const r = checkFile(join(samples, file));
      expect(r.diagnostics).toEqual([]);
      const m = r.model!;
      expect(m.graph.parameterCount()).toBe(params);
      expect(verifyGraph(m.graph)).toEqual([]);
    });
  }

  it("gpt3-175b has 96 blocks of width 12288 with 96 heads, context 2048 and vocab 51200 (50257 padded as Megatron-LM pads it)", () => {
    const g = checkFile(join(samples, "gpt3-175b.fsm")).model!.graph;
    const blocks = g.layers().filter((l) => l.name.startsWith("layers."));
    expect(blocks.length).toBe(96);
    expect(g.param("layers.0.attn.qkv.weight")!.type.shape.map((d) => d.coef)).toEqual([3 * 12288, 12288]);
    expect(g.param("wpe.weight")!.type.shape.map((d) => d.coef)).toEqual([2048, 12288]);
    expect(g.param("wte.weight")!.type.shape.map((d) => d.coef)).toEqual([51200, 12288]);
    const attn = g.ops().find((o) => o.op === "attention")!;
    expect(attn.attrs["heads"]).toBe(96);
    expect(blocks.every((l) => l.annotations.checkpoint && l.annotations.fsdpUnit)).toBe(true);
  });

  it("an import by absolute path reads that file (a model outside samples/ using its library)", () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-abs-import-"));
    const text = readFileSync(join(samples, "gpt-tiny.fsm"), "utf8").replace('import "lib/transformer.fsm"', `import "${join(samples, "lib/transformer.fsm")}"`);
    writeFileSync(join(dir, "tiny.fsm"), text);
    const r = checkFile(join(dir, "tiny.fsm"));
    expect(r.diagnostics.map((d) => d.message)).toEqual([]);
    expect(r.model?.graph.params().length).toBeGreaterThan(0);
  });

  it("gpt2 ties lm_head.weight to wte.weight and counts it once", () => {
    const g = checkFile(join(samples, "gpt2-124m.fsm")).model!.graph;
    expect(g.param("lm_head.weight")!.name).toBe("wte.weight");
    expect(g.params().filter((p) => p.name === "lm_head.weight")).toEqual([]);
  });

  it("llama-7b uses grouped-query-capable attention without biases and rotary embeddings", () => {
    const g = checkFile(join(samples, "llama-7b.fsm")).model!.graph;
    expect(g.param("layers.31.attn.qkv.weight")).toBeDefined();
    expect(g.param("layers.0.attn.qkv.bias")).toBeUndefined();
    expect(g.param("layers.0.ffn.gate.weight")!.type.shape.map((d) => d.coef)).toEqual([11008, 4096]);
    expect(g.ops().find((o) => o.op === "attention")!.attrs["rope"]).toBe(true);
  });

  it("llama-70b shares 8 key/value heads among its 64 query heads (grouped-query attention)", () => {
    const g = checkFile(join(samples, "llama-70b.fsm")).model!.graph;
    expect(g.layers().filter((l) => l.name.startsWith("layers.")).length).toBe(80);
    // Packed QKV: 64 query heads and 2 × 8 key/value heads of 128 each.
    expect(g.param("layers.79.attn.qkv.weight")!.type.shape.map((d) => d.coef)).toEqual([(64 + 2 * 8) * 128, 8192]);
    expect(g.param("layers.0.ffn.gate.weight")!.type.shape.map((d) => d.coef)).toEqual([28672, 8192]);
    const attn = g.ops().find((o) => o.op === "attention")!;
    expect([attn.attrs["heads"], attn.attrs["kv_heads"]]).toEqual([64, 8]);
    expect(g.param("output.weight")!.name).toBe("output.weight");
  });
});
