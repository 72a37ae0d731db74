// Tests that the generated grammar files under grammar/ match the parser, so docs and diagrams cannot drift.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { diagnosticsMarkdown, grammarSnapshot, ruleNames } from "../../src/parse/grammar-snapshot.js";
import { DIAGNOSTIC_CODES } from "../../src/diagnostics/codes.js";
import { opsMarkdown } from "../../src/graph/ops-doc.js";
import { allOps } from "../../src/graph/registry.js";

const grammarDir = join(import.meta.dirname, "../../grammar");
const STALE = "is out of date: run `npm run grammar` and commit the result";

function read(name: string): string {
  const path = join(grammarDir, name);
  if (!existsSync(path)) throw new Error(`grammar/${name} is missing: run \`npm run build && npm run grammar\``);
  return readFileSync(path, "utf8");
}

describe("generated grammar files", () => {
  it("grammar.snapshot.txt matches the parser", () => {
    const expected = grammarSnapshot();
    const actual = read("grammar.snapshot.txt");
    if (actual !== expected) expect.fail(`grammar/grammar.snapshot.txt ${STALE}`);
  });

  it("the snapshot lists every rule", () => {
    const snap = grammarSnapshot();
    const names = ruleNames();
    expect(names).toEqual(expect.arrayContaining(["file", "member", "expression", "unary", "forwardDecl", "settingsBody"]));
    for (const name of names) expect(snap).toContain(`\n${name}\n  = `);
  });

  it("diagrams.html exists, is self-contained and mentions every rule", () => {
    const html = read("diagrams.html");
    expect(html).not.toContain("unpkg.com");
    expect(html).not.toMatch(/<script src=/);
    expect(html).toContain("drawDiagramsFromSerializedGrammar");
    for (const name of ruleNames()) expect(html, `diagrams.html ${STALE} (no rule ${name})`).toContain(`"name": "${name}"`);
  });

  it("diagnostics.md lists every diagnostic code", () => {
    const md = read("diagnostics.md");
    if (md !== diagnosticsMarkdown()) expect.fail(`grammar/diagnostics.md ${STALE}`);
    for (const [code, text] of Object.entries(DIAGNOSTIC_CODES)) expect(md).toContain(`| ${code} | ${text} |`);
  });

  it("ops.md documents every op the language accepts", () => {
    const md = read("ops.md");
    if (md !== opsMarkdown()) expect.fail(`grammar/ops.md ${STALE}`);
    for (const op of allOps().filter((o) => o.kind === "module" || o.kind === "function")) expect(md).toContain(`### ${op.name}\n`);
  });
});
