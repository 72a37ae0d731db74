// Renders a diagnostic as `file:line:col: error[FSM300]: message` plus the source line and a caret under the span.
import type { Diagnostic } from "./diagnostic.js";

export interface SourceLookup {
  /** Source text of a file, or undefined when unknown (the frame is then omitted). */
  (file: string): string | undefined;
}

export function formatDiagnostic(d: Diagnostic, sources: SourceLookup): string {
  const { file, line, column } = d.span;
  const head = `${file}:${line}:${column}: ${d.severity}[${d.code}]: ${d.message}`;
  const lines = [head];
  const text = sources(file);
  if (text !== undefined) lines.push(...codeFrame(text, d));
  for (const note of d.notes ?? []) lines.push(`  = note: ${note}`);
  return lines.join("\n");
}

function codeFrame(text: string, d: Diagnostic): string[] {
  const srcLines = text.split("\n");
  const lineText = (srcLines[d.span.line - 1] ?? "").replace(/\r$/, "").replace(/\t/g, " ");
  const gutter = String(d.span.line).length;
  // A span may run over several lines; underline only its part on the first line.
  const startCol = Math.max(1, d.span.column);
  const endCol = d.span.endLine === d.span.line ? Math.max(d.span.endColumn, startCol + 1) : lineText.length + 1;
  const width = Math.max(1, Math.min(endCol, lineText.length + 1) - startCol);
  const pad = " ".repeat(gutter);
  return [
    `${pad} |`,
    `${d.span.line} | ${lineText}`,
    `${pad} | ${" ".repeat(startCol - 1)}${"^".repeat(width)}`,
  ];
}

export function formatDiagnostics(diags: readonly Diagnostic[], sources: SourceLookup): string {
  return diags.map((d) => formatDiagnostic(d, sources)).join("\n\n");
}
