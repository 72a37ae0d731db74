// Tests that every ```fsm snippet in the grammar reference pages parses with no diagnostics.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSource } from "../../src/parse/index.js";

const grammarDir = join(import.meta.dirname, "../../grammar");
const PAGES = ["lexical", "imports", "expressions", "blocks", "models", "members", "forward", "annotations", "train", "parallel"];

function snippets(page: string): string[] {
  const text = readFileSync(join(grammarDir, `${page}.md`), "utf8");
  return [...text.matchAll(/```fsm\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe("grammar reference pages", () => {
  it("every construct has a page", () => {
    const files = readdirSync(grammarDir);
    for (const page of PAGES) expect(files).toContain(`${page}.md`);
  });

  it.each(PAGES)("%s.md has an EBNF block and snippets that parse", (page) => {
    const text = readFileSync(join(grammarDir, `${page}.md`), "utf8");
    expect(text).toMatch(/## EBNF\n\n```\n[\s\S]+?```/);
    const found = snippets(page);
    expect(found.length).toBeGreaterThanOrEqual(1);
    for (const src of found) {
      const { diagnostics } = parseSource(`${page}.md`, src);
      expect(diagnostics.map((d) => `${d.span.line}:${d.span.column} ${d.message}`), src).toEqual([]);
    }
  });
});
