// bench/frontend: parse + check + graph build time for every sample and for a generated 2,000-layer model.
// Prints one JSON object; run with `npm run bench:frontend` after `npm run build`.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import type { SourceHost } from "../src/check/load.js";
import { parseSource } from "../src/parse/parse-file.js";
import { medianMs } from "./timing.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const samples = ["mlp.fsm", "gpt-tiny.fsm", "gpt2-124m.fsm", "llama-7b.fsm", "gpt3-175b.fsm"];

/** A GPT with `layers` blocks written out one member per layer (no repeat), so the parser sees every layer. */
export function generatedModel(layers: number): string {
  const lines = ['import "lib/transformer.fsm"', "model big {", "  const d = 256, heads = 8", "  wte = embedding(1000, d)"];
  for (let i = 0; i < layers; i++) lines.push(`  block_${i} = GPTBlock(d, heads: heads)`);
  lines.push("  head = linear(d, 1000)", "  forward(tokens: i32[B, S], targets: i32[B, S]) {", "    h = wte(tokens)");
  for (let i = 0; i < layers; i++) lines.push(`    h = block_${i}(h)`);
  lines.push("    return cross_entropy(head(h), targets)", "  }", "}");
  return lines.join("\n") + "\n";
}

const results: Record<string, unknown>[] = [];
for (const s of samples) {
  const path = join(root, "samples", s);
  const text = readFileSync(path, "utf8");
  const r = checkFile(path);
  results.push({
    model: s,
    layers: r.model?.graph.layers().length,
    ops: r.model?.graph.ops().length,
    parseMs: medianMs(() => parseSource(path, text), 5),
    checkAndBuildMs: medianMs(() => checkFile(path), 5),
  });
}

const LAYERS = 2000;
const genPath = join(root, "samples", "generated-2000.fsm");
const genText = generatedModel(LAYERS);
const lib = readFileSync(join(root, "samples/lib/transformer.fsm"), "utf8");
const host: SourceHost = { readFile: (p) => (p === genPath ? genText : p === join(root, "samples/lib/transformer.fsm") ? lib : undefined) };
const gen = checkFile(genPath, { host });
if (!gen.model) throw new Error(`generated model failed to check: ${gen.diagnostics.map((d) => d.message).join("; ")}`);
const genMs = medianMs(() => checkFile(genPath, { host }), 3);
results.push({
  model: `generated ${LAYERS}-layer GPT`,
  sourceBytes: genText.length,
  layers: gen.model.graph.layers().length,
  ops: gen.model.graph.ops().length,
  parseMs: medianMs(() => parseSource(genPath, genText), 3),
  checkAndBuildMs: genMs,
  aimMs: 1000,
  withinAim: genMs < 1000,
});

console.log(JSON.stringify({ bench: "frontend", node: process.version, results }, null, 2));
