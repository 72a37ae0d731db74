// Owns parseSource: lex + parse + CST→AST for one file, mapping every lexer/parser error to a diagnostic; never throws.
import type { IRecognitionException, IToken } from "chevrotain";
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { DiagnosticCode } from "../diagnostics/codes.js";
import type { Span } from "../diagnostics/span.js";
import type { FileAst } from "./ast.js";
import { cstToAst } from "./cst-to-ast.js";
import { sharedParser } from "./parser.js";
import { LineMap, isRealToken, lex, tokenEnd } from "./tokens.js";

export interface ParseResult {
  readonly ast: FileAst;
  readonly diagnostics: Diagnostic[];
}

const EXCEPTION_CODES: Record<string, DiagnosticCode> = {
  MismatchedTokenException: "FSM110",
  NoViableAltException: "FSM111",
  EarlyExitException: "FSM112",
  NotAllInputParsedException: "FSM113",
};

/** Parses one .fsm source text. Syntax errors become diagnostics (sorted by position); the AST holds what could be
 * recovered. Never throws, whatever the input. */
export function parseSource(file: string, text: string): ParseResult {
  const source = typeof text === "string" ? text : String(text);
  let lines: LineMap;
  try {
    lines = new LineMap(file, source);
  } catch {
    lines = new LineMap(file, "");
  }
  const emptyAst: FileAst = { kind: "File", file, items: [], span: lines.span(0, source.length) };
  const diagnostics: Diagnostic[] = [];
  try {
    const lexed = lex(lines);
    diagnostics.push(...lexed.diagnostics);

    const parser = sharedParser();
    parser.input = lexed.tokens;
    const cst = parser.file();
    const lastToken = lastRealToken(lexed.tokens);
    for (const e of parser.errors) diagnostics.push(parserDiagnostic(e, lines, lastToken));

    let ast = emptyAst;
    try {
      const built = cstToAst(cst, lines);
      ast = built.ast;
      diagnostics.push(...built.diagnostics);
    } catch (e) {
      // Defensive: a builder bug must not hide the syntax diagnostics already collected.
      diagnostics.push(internalError(e, lines));
    }
    return { ast, diagnostics: dedupeAndSort(diagnostics) };
  } catch (e) {
    // Last defense (e.g. a stack overflow on absurdly nested input): report instead of crashing the compiler.
    diagnostics.push(internalError(e, lines));
    return { ast: emptyAst, diagnostics: dedupeAndSort(diagnostics) };
  }
}

function lastRealToken(tokens: readonly IToken[]): IToken | undefined {
  for (let i = tokens.length - 1; i >= 0; i--) if (isRealToken(tokens[i])) return tokens[i];
  return undefined;
}

function parserDiagnostic(e: IRecognitionException, lines: LineMap, lastToken: IToken | undefined): Diagnostic {
  const code = EXCEPTION_CODES[e.name] ?? "FSM111";
  return error(code, e.message, errorSpan(e.token, lines, lastToken));
}

/** The offending token's span; an error at end of file (EOF or a recovery token without offsets) is placed just
 * after the last real token, so the caret lands where the missing text belongs. */
function errorSpan(t: IToken | undefined, lines: LineMap, lastToken: IToken | undefined): Span {
  if (isRealToken(t)) return lines.span(t.startOffset, tokenEnd(t));
  const at = lastToken ? tokenEnd(lastToken) : 0;
  return lines.span(at, at);
}

function internalError(e: unknown, lines: LineMap): Diagnostic {
  const why = e instanceof RangeError ? "the input is nested too deeply" : e instanceof Error ? e.message : String(e);
  return error("FSM111", `the parser could not process this file (${why})`, lines.span(0, 0));
}

function dedupeAndSort(diags: Diagnostic[]): Diagnostic[] {
  const seen = new Set<string>();
  const out: Diagnostic[] = [];
  for (const d of diags) {
    const key = `${d.code}|${d.span.start}|${d.span.end}|${d.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(d);
  }
  return out.sort((a, b) => a.span.start - b.span.start || a.span.end - b.span.end);
}
