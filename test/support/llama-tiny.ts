// A tiny Llama (GQA, rotary embeddings, RMSNorm, SwiGLU) over the samples' block library, checked in memory:
// shared by the PyTorch parity test and the native kernel parity test.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { CheckResult } from "../../src/check/check.js";
import { checkSources } from "../check/helpers.js";

const SAMPLES = resolve(import.meta.dirname, "../../samples");

export const LLAMA_TINY = `import "lib/transformer.fsm"
model llama_tiny {
  const vocab = 64, d = 32, heads = 4, n_layer = 2, hidden = 64
  tok_embeddings = embedding(vocab, d)
  layers = repeat(n_layer) LlamaBlock(d, heads: heads, kv_heads: 2, hidden: hidden)
  norm = rms_norm(d, eps: 1e-5)
  output = linear(d, vocab, bias: false)
  forward(tokens: i32[B, S], targets: i32[B, S]) {
    h = tok_embeddings(tokens)
    for layer in layers {
      h = layer(h)
    }
    return cross_entropy(output(norm(h)), targets)
  }
}
`;

/** Checks the tiny Llama, with `extra` (e.g. a train section) appended, as if it stood in samples/. */
export function checkLlamaTiny(extra = ""): CheckResult {
  const lib = readFileSync(join(SAMPLES, "lib", "transformer.fsm"), "utf8");
  return checkSources({ [join(SAMPLES, "llama-tiny.fsm")]: LLAMA_TINY + extra, [join(SAMPLES, "lib", "transformer.fsm")]: lib });
}
