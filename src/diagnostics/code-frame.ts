// Renders a diagnostic as `file:line:col: error[FSM300]: message` plus the source line and a caret under the span.
// What is printed stays bounded whatever the input: at most MAX_SHOWN diagnostics (the rest are counted), a
// window of the source line around the caret, and control characters made visible.
import type { Diagnostic } from "./diagnostic.js";

export interface SourceLookup {
  /** Source text of a file, or undefined when unknown (the frame is then omitted). */
  (file: string): string | undefined;
}

/** As clang's default -ferror-limit: a mistake early in a file (or a binary file) can cascade into hundreds
 *  of errors, and past the first few they only bury the first, which is the one to fix. */
export const MAX_SHOWN = 20;
/** Echoed source lines (and messages) wider than this are cut to a window around the caret. */
const LINE_WIDTH = 120;
/** How much of the line before the caret the window keeps. */
const LEAD = 40;
const MESSAGE_WIDTH = 400;

export function formatDiagnostic(d: Diagnostic, sources: SourceLookup): string {
  const { file, line, column } = d.span;
  const message = d.message.length > MESSAGE_WIDTH ? `${d.message.slice(0, MESSAGE_WIDTH)}…` : d.message;
  const head = `${file}:${line}:${column}: ${d.severity}[${d.code}]: ${message}`;
  const lines = [head];
  const text = sources(file);
  if (text !== undefined) lines.push(...codeFrame(text, d));
  for (const note of d.notes ?? []) lines.push(`  = note: ${note}`);
  return lines.join("\n");
}

function codeFrame(text: string, d: Diagnostic): string[] {
  const srcLines = text.split("\n");
  // One visible character for each control character, so columns still line up under the caret.
  const lineText = (srcLines[d.span.line - 1] ?? "")
    .replace(/\r$/, "")
    .replace(/\t/g, " ")
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, "\ufffd");
  const gutter = String(d.span.line).length;
  // A span may run over several lines; underline only its part on the first line.
  const startCol = Math.max(1, d.span.column);
  const endCol = d.span.endLine === d.span.line ? Math.max(d.span.endColumn, startCol + 1) : lineText.length + 1;
  const width = Math.max(1, Math.min(endCol, lineText.length + 1) - startCol);
  const w = lineWindow(lineText.length, startCol - 1);
  const shown = `${w.from > 0 ? "…" : ""}${lineText.slice(w.from, w.to)}${w.to < lineText.length ? "…" : ""}`;
  const caretAt = startCol - 1 - w.from + (w.from > 0 ? 1 : 0);
  const caretWidth = Math.max(1, Math.min(width, w.to - (startCol - 1)));
  const pad = " ".repeat(gutter);
  return [`${pad} |`, `${d.span.line} | ${shown}`, `${pad} | ${" ".repeat(caretAt)}${"^".repeat(caretWidth)}`];
}

/** The [from, to) part of a line of `length` characters to echo: all of it when it is short, else LINE_WIDTH
 *  characters starting a little before the caret's offset `at`. */
export function lineWindow(length: number, at: number): { from: number; to: number } {
  if (length <= LINE_WIDTH) return { from: 0, to: length };
  const from = Math.max(0, Math.min(at - LEAD, length - LINE_WIDTH));
  return { from, to: from + LINE_WIDTH };
}

export function formatDiagnostics(diags: readonly Diagnostic[], sources: SourceLookup): string {
  const shown = shownDiagnostics(diags);
  const text = shown.map((d) => formatDiagnostic(d, sources)).join("\n\n");
  if (shown.length === diags.length) return text;
  const kept = new Set(shown);
  const errors = diags.filter((d) => !kept.has(d) && d.severity === "error").length;
  const others = diags.length - shown.length - errors;
  const parts = [];
  if (errors > 0) parts.push(`${errors} more error${errors === 1 ? "" : "s"}`);
  if (others > 0) parts.push(`${others} more warning${others === 1 ? "" : "s"}`);
  return `${text}\n\n... ${parts.join(" and ")} not shown (only the first ${MAX_SHOWN} are)`;
}

/** At most MAX_SHOWN diagnostics, in their order: errors first claim the places, warnings take what is left. */
export function shownDiagnostics(diags: readonly Diagnostic[]): readonly Diagnostic[] {
  if (diags.length <= MAX_SHOWN) return diags;
  const errors = diags.filter((d) => d.severity === "error").slice(0, MAX_SHOWN);
  const rest = diags.filter((d) => d.severity !== "error").slice(0, MAX_SHOWN - errors.length);
  const kept = new Set([...errors, ...rest]);
  return diags.filter((d) => kept.has(d));
}
