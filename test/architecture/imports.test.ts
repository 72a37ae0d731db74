// The architecture of src/ as a test: no import cycle between its folders, and the layering rules (who may
// not import whom), checked on every import and export-from of every source file.
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { cyclicComponents, findCycles } from "./cycles.js";
import { srcFolderGraph, type FolderGraph } from "./folder-graph.js";
import { ruleViolations, type LayerRule } from "./layering.js";
import { sourceImports } from "./source-imports.js";

const RULES: readonly LayerRule[] = [
  // viz reads plans and traces; it never runs anything, and the CLI is the one thing above it.
  { from: "viz", mustNotImport: ["runtime", "cli", "native"] },
  // Lowering is a compiler-side phase below both the runtime that executes its programs and checkpoints.
  { from: "lower", mustNotImport: ["runtime", "checkpoint", "viz", "cli"] },
  { from: "checkpoint", mustNotImport: ["runtime"] },
  // The plan document is what compile writes and everything later reads: below all of them.
  { from: "plan", mustNotImport: ["runtime", "checkpoint", "viz", "cli", "search", "compile"] },
  // verify proves a plan file against what compile would have written (its collectives, its schedule rules),
  // so it sits above compile; only the commands that read plans use it.
  { from: "verify", mustNotImport: ["runtime", "checkpoint", "viz", "cli", "search"] },
  // The CLI is the top: nothing else may import it.
  { from: "*", mustNotImport: ["cli"] },
];

/** The folder graph's cycles, each described by the imports behind its edges. */
function folderCycles(graph: FolderGraph): string[] {
  const edges = new Map([...graph].map(([from, to]) => [from, [...to.keys()]]));
  return findCycles(edges).map((c) => describeCycle(graph, c));
}

/** `checkpoint → runtime → checkpoint`, then the imports behind each edge. */
function describeCycle(graph: FolderGraph, cycle: readonly string[]): string {
  const edges = cycle.slice(1).map((to, i) => {
    const from = cycle[i]!;
    const where = graph.get(from)!.get(to)!;
    return `  ${from} → ${to}: ${where.slice(0, 3).join("; ")}${where.length > 3 ? ` (+${where.length - 3} more)` : ""}`;
  });
  return [cycle.join(" → "), ...edges].join("\n");
}

const graphOf = (edges: Record<string, Record<string, string[]>>): FolderGraph =>
  new Map(Object.entries(edges).map(([from, to]) => [from, new Map(Object.entries(to))]));

describe("the checks themselves", () => {
  it("reads every kind of import, and nothing that only looks like one", () => {
    const text = [
      `import { a } from "./a.js";`,
      `import type { B } from "../b/b.js";`,
      `import {`,
      `  c,`,
      `} from "../c/c.js";`,
      `export { d } from "../d/d.js";`,
      `export type * from "../e/e.js";`,
      `import "../f/f.js";`,
      `import { readFileSync } from "node:fs";`,
      `type G = import("../g/g.js").G;`,
      `const h = () => import("../h/h.js");`,
      `// import { x } from "../comment/x.js";`,
      `const s = 'import { y } from "../string/y.js"';`,
    ].join("\n");
    expect(sourceImports("t.ts", text)).toEqual([
      { specifier: "./a.js", line: 1 },
      { specifier: "../b/b.js", line: 2 },
      { specifier: "../c/c.js", line: 3 },
      { specifier: "../d/d.js", line: 6 },
      { specifier: "../e/e.js", line: 7 },
      { specifier: "../f/f.js", line: 8 },
      { specifier: "node:fs", line: 9 },
      { specifier: "../g/g.js", line: 10 },
      { specifier: "../h/h.js", line: 11 },
    ]);
  });

  it("finds a cycle in a small graph, and none in a graph without one", () => {
    const withCycle = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a", "d"]],
      ["d", []],
      ["e", ["f"]],
      ["f", ["e"]],
    ]);
    expect(cyclicComponents(withCycle)).toEqual([["a", "b", "c"], ["e", "f"]]);
    expect(findCycles(withCycle)).toEqual([["a", "b", "c", "a"], ["e", "f", "e"]]);
    expect(findCycles(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]]))).toEqual([]);
    // The shortest way back, not the first found: a → b → a rather than a → c → d → a.
    expect(findCycles(new Map([["a", ["c", "b"]], ["b", ["a"]], ["c", ["d"]], ["d", ["a"]]]))).toEqual([["a", "b", "a"]]);
  });

  it("names the imports that break a rule", () => {
    const g = graphOf({ viz: { runtime: ["src/viz/t.ts:4 ../runtime/t.js"], plan: ["src/viz/p.ts:1 ../plan/p.js"] }, cli: { viz: ["src/cli/v.ts:2 ../viz/v.js"] }, search: { cli: ["src/search/s.ts:3 ../cli/s.js"] } });
    expect(ruleViolations(g, { from: "viz", mustNotImport: ["runtime", "cli"] })).toEqual(["viz → runtime: src/viz/t.ts:4 ../runtime/t.js"]);
    expect(ruleViolations(g, { from: "*", mustNotImport: ["cli"] })).toEqual(["search → cli: src/search/s.ts:3 ../cli/s.js"]);
  });

  it("shows a folder cycle with the imports behind each edge", () => {
    const g = graphOf({ a: { b: ["src/a/x.ts:1 ../b/x.js"], c: ["src/a/z.ts:5 ../c/z.js"] }, b: { a: ["src/b/y.ts:2 ../a/y.js"] }, c: {} });
    expect(folderCycles(g)).toEqual(["a → b → a\n  a → b: src/a/x.ts:1 ../b/x.js\n  b → a: src/b/y.ts:2 ../a/y.js"]);
    expect(folderCycles(graphOf({ a: { b: ["src/a/x.ts:1 ../b/x.js"] }, b: {} }))).toEqual([]);
  });
});

describe("src/ folder dependencies", () => {
  const { files, graph } = srcFolderGraph(resolve(import.meta.dirname, "../../src"));

  it("are read from the whole tree", () => {
    // A broken file walk would pass every rule vacuously.
    expect(files).toBeGreaterThan(200);
    expect(graph.get("compile")?.has("search")).toBe(true);
    expect(graph.get("cli")?.has("viz")).toBe(true);
  });

  it("have no cycle between folders", () => {
    expect(folderCycles(graph)).toEqual([]);
  });

  it.each(RULES.map((r) => [r.from === "*" ? `no other folder imports ${r.mustNotImport.join(" or ")}` : `${r.from} imports none of ${r.mustNotImport.join(", ")}`, r] as const))("%s", (_, rule) => {
    expect(ruleViolations(graph, rule)).toEqual([]);
  });
});
