// A small robustness loop: random mutations of the samples must never throw and must give valid spans.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { rng } from "../support/prng.js";
import { parseSource } from "../../src/parse/index.js";
import { allSpans, spanIsValid } from "./helpers.js";

const samplesDir = join(import.meta.dirname, "../../samples");
const samples = [
  ...readdirSync(samplesDir).filter((f) => f.endsWith(".fsm")).map((f) => join(samplesDir, f)),
  join(samplesDir, "lib/transformer.fsm"),
].map((p) => readFileSync(p, "utf8"));

const PIECES = ["{", "}", "(", ")", "[", "]", ",", ":", "=", ".", "+", "-", "*", "/", "%", "@", '"', "/*", "*/",
  "\n", " ", "repeat", "as", "for", "in", "return", "model", "block", "1e999", "1f1b", "50_", "\\", "$", "\u0000", "é"];

function mutate(text: string, rand: () => number): string {
  let s = text;
  const n = 1 + Math.floor(rand() * 4);
  for (let k = 0; k < n; k++) {
    const at = Math.floor(rand() * (s.length + 1));
    const op = rand();
    if (op < 0.3) s = s.slice(0, at) + s.slice(at + 1 + Math.floor(rand() * 8)); // delete a few characters
    else if (op < 0.6) s = s.slice(0, at) + PIECES[Math.floor(rand() * PIECES.length)] + s.slice(at); // insert a token
    else if (op < 0.8) s = s.slice(0, at); // truncate
    else {
      const from = Math.floor(rand() * s.length); // duplicate a slice elsewhere
      s = s.slice(0, at) + s.slice(from, from + Math.floor(rand() * 40)) + s.slice(at);
    }
  }
  return s;
}

describe("robustness", () => {
  it("300 random mutations of the samples never throw and keep every span valid", () => {
    const rand = rng(20240601);
    for (let i = 0; i < 300; i++) {
      const src = mutate(samples[i % samples.length]!, rand);
      let result: ReturnType<typeof parseSource> | undefined;
      expect(() => (result = parseSource("m.fsm", src)), `mutation ${i}`).not.toThrow();
      for (const d of result!.diagnostics) expect(spanIsValid(d.span, src), `mutation ${i}: ${d.code} ${d.message}`).toBe(true);
      for (const span of allSpans(result!.ast)) expect(spanIsValid(span, src), `mutation ${i}: AST span`).toBe(true);
    }
  });

  it("random bytes never throw", () => {
    const rand = rng(7);
    for (let i = 0; i < 50; i++) {
      const src = Array.from({ length: 1 + Math.floor(rand() * 200) }, () => String.fromCharCode(Math.floor(rand() * 0x3000))).join("");
      const { diagnostics } = parseSource("r.fsm", src);
      for (const d of diagnostics) expect(spanIsValid(d.span, src)).toBe(true);
    }
  });
});
