// Test helpers for the parse tests: compact S-expression printing of expressions and span validation.
import { expect } from "vitest";
import type { Diagnostic } from "../../src/diagnostics/diagnostic.js";
import type { Span } from "../../src/diagnostics/span.js";
import type { Expr, FileAst } from "../../src/parse/ast.js";
import { parseSource } from "../../src/parse/index.js";

/** `a + b * c` → `(+ a (* b c))`; numbers as written; calls `(call f a k:b)`, members `(. a b)`, index `([] a i)`. */
export function sexpr(e: Expr): string {
  switch (e.kind) {
    case "Number":
      return e.text;
    case "String":
      return JSON.stringify(e.value);
    case "Bool":
      return String(e.value);
    case "Auto":
      return "auto";
    case "Name":
      return e.name;
    case "Member":
      return `(. ${sexpr(e.object)} ${e.property.name})`;
    case "Index":
      return `([] ${sexpr(e.object)} ${sexpr(e.index)})`;
    case "Call":
      return `(call ${[sexpr(e.callee), ...e.args.map((a) => (a.name ? `${a.name.name}:` : "") + sexpr(a.value))].join(" ")})`;
    case "Unary":
      return `(${e.op} ${sexpr(e.operand)})`;
    case "Binary":
      return `(${e.op} ${sexpr(e.left)} ${sexpr(e.right)})`;
    case "Tuple":
      return `(tuple ${e.items.map(sexpr).join(" ")})`;
    case "List":
      return `[${e.items.map(sexpr).join(" ")}]`;
  }
}

/** Parses `const x = <src>` and returns the expression, asserting no diagnostics. */
export function expr(src: string): Expr {
  const { ast, diagnostics } = parseSource("t.fsm", `const x = ${src}`);
  expect(diagnostics).toEqual([]);
  const item = ast.items[0];
  if (item?.kind !== "Const") throw new Error(`expected a const, got ${item?.kind}`);
  return item.value;
}

/** `line:col CODE` for each diagnostic, for compact assertions. */
export function where(diags: readonly Diagnostic[]): string[] {
  return diags.map((d) => `${d.span.line}:${d.span.column} ${d.code}`);
}

/** True when a span is well formed and inside a text: offsets in range, 1-based line/column consistent with them. */
export function spanIsValid(span: Span, text: string): boolean {
  if (!(Number.isInteger(span.start) && Number.isInteger(span.end))) return false;
  if (span.start < 0 || span.end < span.start || span.end > text.length) return false;
  const lc = (offset: number): [number, number] => {
    const before = text.slice(0, offset);
    const line = before.split("\n").length;
    return [line, offset - (before.lastIndexOf("\n") + 1) + 1];
  };
  const [l, c] = lc(span.start);
  const [el, ec] = lc(span.end);
  return span.line === l && span.column === c && span.endLine === el && span.endColumn === ec && l >= 1 && c >= 1;
}

/** Every span in an AST (deep walk over all objects that have one). */
export function allSpans(ast: FileAst): Span[] {
  const out: Span[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k === "span") out.push(x as Span);
        else walk(x);
      }
    }
  };
  walk(ast);
  return out;
}
