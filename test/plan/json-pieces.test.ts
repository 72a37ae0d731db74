// JSON text in pieces (plan files longer than V8's longest string): the pieces join to exactly what
// JSON.stringify writes, for the values a plan holds and the corner cases it leaves out or rewrites.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonPieces, writeLaterMembers } from "../../src/plan/json-pieces.js";
import { planToJson, writePlan } from "../../src/plan/serialize.js";
import { withHash } from "../../src/plan/content-hash.js";
import { compileSample } from "../compile/helpers.js";

const values: [string, unknown][] = [
  ["scalars", [1, -0, 2.5e-300, "a\"b\\n", true, null]],
  ["undefined, functions and symbols left out of objects, null in arrays", { a: undefined, b: () => 1, c: Symbol("x"), d: [undefined, () => 2, Symbol("y")], e: 1 }],
  ["toJSON respected", { when: new Date(0), nested: { toJSON: () => "replaced" } }],
  ["a long array of objects, deep", { top: { mid: { ops: Array.from({ length: 3000 }, (_, i) => ({ id: i, text: `op ${i}`, deps: [i - 1, i - 2] })) } } }],
  ["empty containers", { a: [], b: {}, c: [[]], d: [{}] }],
];

describe("jsonPieces", () => {
  it.each(values)("%s: the pieces join to JSON.stringify's text", (_, v) => {
    expect(jsonPieces(v).join("")).toBe(JSON.stringify(v));
  });

  it("cuts a long plan into pieces of about a megabyte, never one string", () => {
    const big = { ops: Array.from({ length: 40000 }, (_, i) => ({ id: i, name: `layers.${i}.attn`, shape: [8, 1024, 768] })) };
    const pieces = jsonPieces(big);
    expect(pieces.length).toBeGreaterThan(1);
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(2 * 2 ** 20);
    expect(pieces.join("")).toBe(JSON.stringify(big));
  });

  it("writeLaterMembers writes an object's members after its first, in its order, each to its key's sink", () => {
    const o = { z: 1, a: [1, 2], skipped: undefined, m: { k: "v" } };
    const texts = new Map<string, string>();
    writeLaterMembers(o, (key) => (p) => texts.set(key, (texts.get(key) ?? "") + p));
    expect([...texts.keys()]).toEqual(["z", "a", "m"]);
    expect(`{"first":0${[...texts.values()].join("")}}`).toBe(JSON.stringify({ first: 0, ...o }));
  });

  it("a plan written in pieces is the JSON of the plan sealed with its hash, in the file as in the text", () => {
    const { plan } = compileSample("gpt-tiny", "cpu", { "parallel.stages": 2, "parallel.data_parallel": 1, "parallel.chunks": 2, "parallel.schedule": "1f1b", "parallel.checkpoint": "never" });
    const text = JSON.stringify(withHash(plan)) + "\n";
    expect(planToJson(plan)).toBe(text);
    const dir = mkdtempSync(join(tmpdir(), "fsm-json-pieces-"));
    try {
      const file = join(dir, "plan.json");
      expect(writePlan(file, plan)).toBe(Buffer.byteLength(text));
      expect(readFileSync(file, "utf8")).toBe(text);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
