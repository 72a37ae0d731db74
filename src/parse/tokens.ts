// Owns the .fsm token set and lexer: keywords, names, numbers, strings, punctuation, comments, and lexical diagnostics.
import type { IToken, TokenType } from "chevrotain";
import { Lexer, createToken } from "./chevrotain.js";
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";

// ---------- names ----------

export const Name = createToken({ name: "Name", pattern: /[A-Za-z_][A-Za-z0-9_]*/, label: "NAME" });

// A word that starts with digits and continues with a letter (`1f1b`) is a name, not a number followed by a name,
// so enum words such as `schedule = 1f1b` need no quotes. It is a category member of Name so the parser sees a Name.
export const DigitWord = createToken({
  name: "DigitWord",
  pattern: /[0-9][0-9_]*[A-Za-z][A-Za-z0-9_]*/,
  categories: [Name],
  label: "NAME",
});

// ---------- keywords ----------

// longer_alt makes `information`, `asx`, `blocks`, `forward_x` names. Keywords are listed longest first so that a
// keyword that is a prefix of another (`for` / `forward`) can never win over it.
function keyword(word: string): TokenType {
  const name = word[0]!.toUpperCase() + word.slice(1);
  return createToken({ name, pattern: new RegExp(word), longer_alt: Name, label: `'${word}'` });
}

export const Import = keyword("import");
export const Const = keyword("const");
export const Block = keyword("block");
export const Model = keyword("model");
export const Forward = keyword("forward");
export const Return = keyword("return");
export const For = keyword("for");
export const In = keyword("in");
export const Repeat = keyword("repeat");
export const As = keyword("as");
export const Train = keyword("train");
export const Parallel = keyword("parallel");
export const True = keyword("true");
export const False = keyword("false");
export const Auto = keyword("auto");

export const keywordTokens: readonly TokenType[] = [
  Import, Const, Block, Model, Forward, Return, For, In, Repeat, As, Train, Parallel, True, False, Auto,
].sort((a, b) => String(b.PATTERN).length - String(a.PATTERN).length);

// ---------- literals ----------

// Digits with single `_` separators, an optional fraction and exponent. The negative lookahead rejects a number
// glued to a letter, digit, `_` or `.digit`, so `1f1b` falls through to DigitWord and `50_` / `1.5x` to BadNumber.
export const NumberLit = createToken({
  name: "Number",
  pattern: /[0-9]+(?:_[0-9]+)*(?:\.[0-9]+(?:_[0-9]+)*)?(?:[eE][+-]?[0-9]+(?:_[0-9]+)*)?(?![A-Za-z0-9_]|\.[0-9])/,
  label: "NUMBER",
});
// Anything else that starts with a digit (`50_`, `1__0`, `1.5x`): kept as a Number so the parser goes on, reported
// as FSM120 by the lexer pass and dropped by the AST builder.
export const BadNumber = createToken({
  name: "BadNumber",
  pattern: /[0-9][A-Za-z0-9_.]*/,
  categories: [NumberLit],
  label: "NUMBER",
});

export const StringLit = createToken({
  name: "String",
  pattern: /"(?:[^"\\\n\r]|\\[^\n\r])*"/,
  label: "STRING",
});
// A string that reaches the end of the line: reported as FSM101 but handed to the parser as a String, so one missing
// quote gives one diagnostic rather than a cascade.
export const UnterminatedString = createToken({
  name: "UnterminatedString",
  pattern: /"(?:[^"\\\n\r]|\\[^\n\r])*\\?/,
  categories: [StringLit],
  label: "STRING",
});

// ---------- punctuation ----------

function punct(name: string, text: string): TokenType {
  return createToken({ name, pattern: text, label: `'${text}'` });
}

export const LBrace = punct("LBrace", "{");
export const RBrace = punct("RBrace", "}");
export const LParen = punct("LParen", "(");
export const RParen = punct("RParen", ")");
export const LBracket = punct("LBracket", "[");
export const RBracket = punct("RBracket", "]");
export const Comma = punct("Comma", ",");
export const Colon = punct("Colon", ":");
export const Equals = punct("Equals", "=");
export const Dot = punct("Dot", ".");
export const Plus = punct("Plus", "+");
export const Minus = punct("Minus", "-");
export const Star = punct("Star", "*");
export const Percent = punct("Percent", "%");
export const At = punct("At", "@");
export const Slash = punct("Slash", "/");

// ---------- trivia ----------

export const WhiteSpace = createToken({ name: "WhiteSpace", pattern: /[ \t\r\n\f\v\uFEFF]+/, group: Lexer.SKIPPED, line_breaks: true });
export const LineComment = createToken({ name: "LineComment", pattern: /\/\/[^\n\r]*/, group: Lexer.SKIPPED });
export const BlockComment = createToken({
  name: "BlockComment",
  pattern: /\/\*[\s\S]*?\*\//,
  group: Lexer.SKIPPED,
  line_breaks: true,
});
// A `/*` without its `*/` swallows the rest of the file; it goes to its own group so it can be reported as FSM102.
export const UnterminatedComment = createToken({
  name: "UnterminatedComment",
  pattern: /\/\*[\s\S]*/,
  group: "unterminated",
  line_breaks: true,
});

/** All tokens in match order (chevrotain takes the first pattern that matches, not the longest). */
export const allTokens: readonly TokenType[] = [
  WhiteSpace,
  BlockComment,
  UnterminatedComment,
  LineComment,
  ...keywordTokens,
  Name,
  NumberLit,
  DigitWord,
  BadNumber,
  StringLit,
  UnterminatedString,
  LBrace,
  RBrace,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equals,
  Dot,
  Plus,
  Minus,
  Star,
  Percent,
  At,
  Slash,
];

// positionTracking "onlyOffset": lines and columns are computed from offsets by LineMap, which is cheaper than having
// chevrotain track them per token and stays correct for recovered tokens. ensureOptimizations makes a pattern that
// would disable the first-character dispatch fail at load time instead of silently slowing the lexer down.
const lexer = new Lexer(allTokens as TokenType[], {
  positionTracking: "onlyOffset",
  ensureOptimizations: true,
});

// ---------- positions ----------

/** Maps character offsets of one text to 1-based line/column spans. */
export class LineMap {
  private readonly starts: number[] = [0];
  constructor(
    readonly file: string,
    readonly text: string,
  ) {
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) this.starts.push(i + 1);
  }

  /** 1-based [line, column] of an offset, clamped into [0, text.length]. */
  position(offset: number): [number, number] {
    const o = Math.max(0, Math.min(Number.isFinite(offset) ? Math.floor(offset) : 0, this.text.length));
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= o) lo = mid;
      else hi = mid - 1;
    }
    return [lo + 1, o - this.starts[lo]! + 1];
  }

  /** Span of [start, end) with end clamped to be >= start. */
  span(start: number, end: number): Span {
    const s = Math.max(0, Math.min(Number.isFinite(start) ? start : 0, this.text.length));
    const e = Math.max(s, Math.min(Number.isFinite(end) ? end : s, this.text.length));
    const [line, column] = this.position(s);
    const [endLine, endColumn] = this.position(e);
    return { file: this.file, start: s, end: e, line, column, endLine, endColumn };
  }
}

/** True for a token that really occurs in the source (not inserted by parser recovery, not EOF). */
export function isRealToken(t: IToken | undefined): t is IToken {
  return (
    t !== undefined &&
    t.isInsertedInRecovery !== true &&
    Number.isFinite(t.startOffset) &&
    t.tokenType !== undefined &&
    t.tokenType.name !== "EOF"
  );
}

/** Exclusive end offset of a token. The lexer tracks only start offsets (cheaper), and a token never spans a
 * line break that would make its image length differ from its source length. */
export function tokenEnd(t: IToken): number {
  return t.startOffset + t.image.length;
}

/** Shows source text in a diagnostic: quoted, control characters escaped, long text cut. */
export function quoteSource(s: string): string {
  const cut = s.length > 24 ? s.slice(0, 24) + "…" : s;
  const shown = cut.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    if (c === "\n") return "\\n";
    if (c === "\t") return "\\t";
    if (c === "\r") return "\\r";
    return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  });
  return `'${shown}'`;
}

// ---------- lexing ----------

export interface LexOutput {
  /** Tokens for the parser, including recovered ones (unterminated strings, bad numbers). */
  readonly tokens: IToken[];
  readonly diagnostics: Diagnostic[];
}

/** Lexes a whole text; never throws on any input. Lexical problems become FSM100/101/102/120 diagnostics. */
export function lex(lines: LineMap): LexOutput {
  const result = lexer.tokenize(lines.text);
  const diagnostics: Diagnostic[] = [];

  for (const e of result.errors) {
    const bad = lines.text.slice(e.offset, e.offset + Math.max(1, e.length));
    const what = [...bad].length > 1 ? "unexpected characters" : "unexpected character";
    diagnostics.push(error("FSM100", `${what} ${quoteSource(bad)}`, lines.span(e.offset, e.offset + Math.max(1, e.length))));
  }
  for (const t of result.groups["unterminated"] ?? []) {
    diagnostics.push(
      error("FSM102", "unterminated block comment: '/*' has no matching '*/'", lines.span(t.startOffset, t.startOffset + 2)),
    );
  }
  for (const t of result.tokens) {
    const end = tokenEnd(t);
    if (t.tokenType === UnterminatedString) {
      diagnostics.push(error("FSM101", "unterminated string literal: missing closing '\"' before the end of the line", lines.span(t.startOffset, end)));
    } else if (t.tokenType === BadNumber) {
      diagnostics.push(error("FSM120", `invalid number literal ${quoteSource(t.image)}`, lines.span(t.startOffset, end)));
    }
    if (t.tokenType === StringLit || t.tokenType === UnterminatedString) {
      // Only \" \\ \n \t are escapes; anything else after a backslash is a typo worth reporting.
      const re = /\\(.)/gs;
      for (let m = re.exec(t.image); m !== null; m = re.exec(t.image)) {
        if (!'"\\nt'.includes(m[1]!)) {
          const at = t.startOffset + m.index;
          diagnostics.push(
            error("FSM100", `unknown escape sequence ${quoteSource(m[0])} in string (use \\" \\\\ \\n or \\t)`, lines.span(at, at + 2)),
          );
        }
      }
    }
  }
  return { tokens: result.tokens, diagnostics };
}

/** The value of a String token: quotes removed, escapes decoded (unknown escapes keep the character). An
 * unterminated string has no closing quote to remove. */
export function decodeString(image: string, terminated: boolean): string {
  const body = image.slice(1, terminated && image.length >= 2 ? -1 : undefined);
  return body.replace(/\\(.)/gs, (_m, c: string) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
}
