// Tests lexical and syntax diagnostics: each code with its position, messages, recovery and end-of-file spans.
import { describe, expect, it } from "vitest";
import type { ModelDecl } from "../../src/parse/ast.js";
import { parseSource } from "../../src/parse/index.js";
import { allSpans, spanIsValid, where } from "./helpers.js";

function diags(src: string) {
  return parseSource("t.fsm", src).diagnostics;
}

describe("lexical diagnostics", () => {
  it("FSM100 for an unexpected character, with its line and column", () => {
    const d = diags("const a = 1\nconst b = 2 +$ 3\n");
    expect(where(d)).toEqual(["2:14 FSM100"]);
    expect(d[0]!.message).toBe("unexpected character '$'");
    expect(d[0]!.span).toMatchObject({ endLine: 2, endColumn: 15 });
  });

  it("FSM100 merges a run of bad characters into one diagnostic and escapes control characters", () => {
    const d = diags("\u0000\u0001 const a = 1");
    expect(where(d)).toEqual(["1:1 FSM100"]);
    expect(d[0]!.message).toBe("unexpected characters '\\u0000\\u0001'");
  });

  it("FSM101 for an unterminated string, parsing on afterwards", () => {
    const { ast, diagnostics } = parseSource("t.fsm", 'import "lib/x.fsm\nconst a = 1');
    expect(where(diagnostics)).toEqual(["1:8 FSM101"]);
    expect(diagnostics[0]!.span).toMatchObject({ endLine: 1, endColumn: 18 });
    expect(ast.items.map((i) => i.kind)).toEqual(["Import", "Const"]);
    expect(ast.items[0]!.kind === "Import" && ast.items[0]!.path.value).toBe("lib/x.fsm");
  });

  it("FSM102 for an unterminated block comment, at its opening", () => {
    const d = diags("const a = 1\n  /* never closed\nconst b = 2");
    expect(where(d)).toEqual(["2:3 FSM102"]);
    expect(d[0]!.span).toMatchObject({ endLine: 2, endColumn: 5 });
  });

  it("comments and whitespace are skipped", () => {
    const { ast, diagnostics } = parseSource("t.fsm", "// line\nconst /* inline */ a = 1 // trailing\n/* multi\nline */ const b = 2\r\n");
    expect(diagnostics).toEqual([]);
    expect(ast.items).toHaveLength(2);
    expect(ast.items[1]!.span).toMatchObject({ line: 4, column: 15 });
  });
});

describe("syntax diagnostics", () => {
  it("FSM110 names the expected and the found token", () => {
    const d = diags("model m {\n  forward(x) {\n    h = f(x\n    return h\n  }\n}");
    expect(where(d)).toEqual(["4:5 FSM110"]);
    expect(d[0]!.message).toBe("expected ')' but found 'return'");
    expect(d[0]!.span).toMatchObject({ endLine: 4, endColumn: 11 });
  });

  it("FSM110 for a member that is not a call", () => {
    const d = diags("model m {\n  x = 3\n}");
    expect(where(d)).toEqual(["2:7 FSM110"]);
    expect(d[0]!.message).toContain("call");
  });

  it("FSM111 when no alternative fits", () => {
    const d = diags("train {\n  batch = )\n}");
    expect(where(d)).toEqual(["2:11 FSM111"]);
    expect(d[0]!.message).toBe("expected an expression but found ')'");
  });

  it("FSM111 for annotations before something that cannot be annotated", () => {
    const d = diags("@stage(1)\nconst a = 1");
    expect(where(d)).toEqual(["2:1 FSM111"]);
    expect(d[0]!.message).toBe("expected 'block' or 'model' but found 'const'");
  });

  it("FSM112 when a list that needs at least one item is empty", () => {
    const d = diags("model m {\n  forward(x: f32[]) { return x }\n}");
    expect(where(d)).toEqual(["2:18 FSM112"]);
    expect(d[0]!.message).toContain("expected an expression but found ']'");
  });

  it("FSM113 for input that cannot start a declaration", () => {
    const d = diags("}");
    expect(where(d)).toEqual(["1:1 FSM113"]);
  });

  it("a stray token between declarations is reported and the rest still parses", () => {
    const { ast, diagnostics } = parseSource("t.fsm", "const a = 1\n)\nconst b = 2");
    expect(where(diagnostics)).toEqual(["2:1 FSM110"]);
    expect(ast.items.map((i) => i.kind === "Const" && i.name.name)).toEqual(["a", "b"]);
  });

  it("an error at end of file is placed just after the last token", () => {
    const d = diags("model m {\n  a = linear(1)   \n\n// trailing comment\n");
    expect(where(d)).toEqual(["2:16 FSM110"]);
    expect(d[0]!.message).toBe("expected a member, 'const', 'forward' or '}' but found end of file");
    expect(d[0]!.span).toMatchObject({ start: 25, end: 25, endLine: 2, endColumn: 16 });
  });

  it("an error in an empty file would be at 1:1", () => {
    expect(diags("")).toEqual([]);
    expect(where(diags("const"))).toEqual(["1:6 FSM112"]);
  });

  it("reports several errors in one run and keeps what it could recover", () => {
    const src = [
      "block B(d: int, ) {",      // 1: trailing comma in params
      "  fc = linear(d d)",       // 2: missing comma
      "  forward(x) { return fc(x) }",
      "}",
      "model m {",
      "  a = B(1)",
      "  b = ",                   // 7: member without a call
      "  c = B(2)",
      "  forward(t: i32[B, S]) {",
      "    h = a(t) +",           // 10: dangling operator
      "    return h",
      "  }",
      "}",
      "train { batch = 8 seq = }", // 14: missing value
    ].join("\n");
    const { ast, diagnostics } = parseSource("t.fsm", src);
    expect(diagnostics.length).toBeGreaterThanOrEqual(4);
    const lines = new Set(diagnostics.map((d) => d.span.line));
    for (const line of [1, 2, 8, 11, 14]) expect(lines.has(line), `an error on line ${line}: ${where(diagnostics)}`).toBe(true);
    expect(ast.items.map((i) => i.kind)).toEqual(["Block", "Model", "Train"]);
    const m = ast.items[1] as ModelDecl;
    expect(m.body.filter((i) => i.kind === "Member").map((i) => i.kind === "Member" && i.name.name)).toContain("a");
    for (const span of allSpans(ast)) expect(spanIsValid(span, src)).toBe(true);
    for (const d of diagnostics) expect(spanIsValid(d.span, src)).toBe(true);
  });

  it("diagnostics are sorted by position", () => {
    const d = diags("const a = $\nconst b = \"x\nconst c = 1 +\n");
    const starts = d.map((x) => x.span.start);
    expect(starts).toEqual([...starts].sort((a, b) => a - b));
    expect(d.length).toBeGreaterThanOrEqual(3);
  });
});

describe("never throws", () => {
  it.each([
    ["deep nesting", "const a = " + "(".repeat(20000) + "1" + ")".repeat(20000)],
    ["long operator chain", "const a = " + Array.from({ length: 20000 }, () => "1").join(" + ")],
    ["many signs", "const a = " + "-".repeat(20000) + "1"],
    ["only garbage", "\u0000\uffff\ud800#$&|~`!?^"],
    ["truncated", 'model m { forward(t: i32[B,'],
    ["unicode names", "const été = 1"],
  ])("%s", (_name, src) => {
    const r = parseSource("t.fsm", src);
    expect(r.ast.kind).toBe("File");
    for (const d of r.diagnostics) expect(spanIsValid(d.span, src)).toBe(true);
  });

  it("the parser is reusable after a failed parse", () => {
    parseSource("t.fsm", "const a = " + "(".repeat(20000));
    const { ast, diagnostics } = parseSource("t.fsm", "const a = 1");
    expect(diagnostics).toEqual([]);
    expect(ast.items).toHaveLength(1);
  });
});
