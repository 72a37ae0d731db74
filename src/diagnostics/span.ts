// Source locations: every AST node and every diagnostic carries a Span into one source file.

/** A half-open character range [start, end) in a file, with 1-based line/column of its start and end. */
export interface Span {
  readonly file: string;
  readonly start: number;
  readonly end: number;
  readonly line: number;
  readonly column: number;
  readonly endLine: number;
  readonly endColumn: number;
}

/** Span covering both a and b (a must come first in the same file). */
export function joinSpans(a: Span, b: Span): Span {
  return {
    file: a.file,
    start: a.start,
    end: Math.max(a.end, b.end),
    line: a.line,
    column: a.column,
    endLine: b.end >= a.end ? b.endLine : a.endLine,
    endColumn: b.end >= a.end ? b.endColumn : a.endColumn,
  };
}

/** A span for things that have no better location (whole file, command line). */
export function fileSpan(file: string): Span {
  return { file, start: 0, end: 0, line: 1, column: 1, endLine: 1, endColumn: 1 };
}

/** Computes line/column for offsets in a text; used by the lexer-independent parts (imports, CLI --set). */
export function spanAt(file: string, text: string, start: number, end: number): Span {
  const [line, column] = lineColumn(text, start);
  const [endLine, endColumn] = lineColumn(text, end);
  return { file, start, end, line, column, endLine, endColumn };
}

function lineColumn(text: string, offset: number): [number, number] {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return [line, offset - lineStart + 1];
}
