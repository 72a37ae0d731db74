// Fuzzing the front end: thousands of mutated samples (token deletions, insertions, swaps, truncations,
// random bytes) must never throw, and every diagnostic must carry a valid span inside its file.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { rng } from "../support/prng.js";
import { checkFile } from "../../src/check/check.js";
import type { SourceHost } from "../../src/check/load.js";

const samplesDir = resolve(import.meta.dirname, "../../samples");
const SAMPLES = ["mlp.fsm", "gpt-tiny.fsm", "gpt2-124m.fsm", "llama-7b.fsm", "lib/transformer.fsm"];
const CASES_PER_SAMPLE = 700;

const TOKENS = ["{", "}", "(", ")", "[", "]", ",", ":", "=", ".", "+", "*", "/", "//", "-", "@", "model", "block", "forward", "return", "for", "in", "repeat", "as", "import", "const", "train", "parallel", "auto", "true", "x", "linear", "1f1b", "0", "7", "1e999", '"s"', '"', "/*", "//c\n", "\n", "@stage(", "B", "S"];

function tokenize(text: string): string[] {
  return text.match(/\s+|[A-Za-z_0-9.]+|"[^"\n]*"|\/\/[^\n]*|./g) ?? [];
}

function mutate(text: string, r: () => number): string {
  const toks = tokenize(text);
  const pick = () => Math.floor(r() * toks.length);
  const kind = Math.floor(r() * 6);
  const n = 1 + Math.floor(r() * 3);
  for (let k = 0; k < n; k++) {
    switch (kind) {
      case 0:
        toks.splice(pick(), 1);
        break;
      case 1:
        toks.splice(pick(), 0, TOKENS[Math.floor(r() * TOKENS.length)]!);
        break;
      case 2: {
        const i = pick();
        const j = pick();
        [toks[i], toks[j]] = [toks[j]!, toks[i]!];
        break;
      }
      case 3:
        return toks.slice(0, pick()).join("");
      case 4: {
        const i = pick();
        const bytes = Array.from({ length: 1 + Math.floor(r() * 4) }, () => String.fromCharCode(Math.floor(r() * 256)));
        toks.splice(i, 0, bytes.join(""));
        break;
      }
      case 5:
        toks.splice(pick(), 0, toks[pick()]!);
        break;
    }
  }
  return toks.join("");
}

describe("front-end fuzz", () => {
  const originals = new Map(SAMPLES.map((s) => [join(samplesDir, s), readFileSync(join(samplesDir, s), "utf8")]));

  for (const [si, sample] of SAMPLES.entries()) {
    it(`${sample}: ${CASES_PER_SAMPLE} mutations never throw and give valid spans`, () => {
      const r = rng(1000 + si);
      const path = join(samplesDir, sample);
      let withErrors = 0;
      for (let c = 0; c < CASES_PER_SAMPLE; c++) {
        const text = mutate(originals.get(path)!, r);
        const files = new Map(originals);
        files.set(path, text);
        const host: SourceHost = { readFile: (p) => files.get(p) };
        let result;
        try {
          result = checkFile(path, { host });
        } catch (e) {
          throw new Error(`case ${c} threw ${String(e)} on input:\n${text}`);
        }
        if (result.diagnostics.some((d) => d.severity === "error")) withErrors++;
        for (const d of result.diagnostics) {
          const src = result.sources.get(d.span.file);
          const ok =
            src !== undefined &&
            d.span.line >= 1 &&
            d.span.column >= 1 &&
            d.span.start >= 0 &&
            d.span.start <= d.span.end &&
            d.span.end <= src.length + 1 &&
            d.span.line <= src.split("\n").length;
          if (!ok) throw new Error(`case ${c}: invalid span ${JSON.stringify(d.span)} for ${d.code} ${d.message}`);
        }
      }
      // Most mutations break the file; if none did, the mutator (not the checker) is broken.
      expect(withErrors).toBeGreaterThan(CASES_PER_SAMPLE / 4);
    });
  }
});
