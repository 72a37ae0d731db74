// The Diagnostic record that every phase reports user errors with (never exceptions for bad input).
import type { Span } from "./span.js";
import type { DiagnosticCode } from "./codes.js";

export type Severity = "error" | "warning" | "note";

export interface Diagnostic {
  readonly code: DiagnosticCode;
  readonly severity: Severity;
  readonly message: string;
  readonly span: Span;
  /** Optional follow-up lines, e.g. "did you mean 'layers'?" or "declared here". */
  readonly notes?: readonly string[];
}

export function error(code: DiagnosticCode, message: string, span: Span, notes?: readonly string[]): Diagnostic {
  return notes && notes.length > 0 ? { code, severity: "error", message, span, notes } : { code, severity: "error", message, span };
}

export function warning(code: DiagnosticCode, message: string, span: Span, notes?: readonly string[]): Diagnostic {
  return notes && notes.length > 0 ? { code, severity: "warning", message, span, notes } : { code, severity: "warning", message, span };
}

export function hasErrors(diags: readonly Diagnostic[]): boolean {
  return diags.some((d) => d.severity === "error");
}

/** Stable order for printing: by file, then position, then code. */
export function sortDiagnostics(diags: readonly Diagnostic[]): Diagnostic[] {
  return [...diags].sort(
    (a, b) =>
      (a.span.file < b.span.file ? -1 : a.span.file > b.span.file ? 1 : 0) ||
      a.span.start - b.span.start ||
      (a.code < b.code ? -1 : a.code > b.code ? 1 : 0),
  );
}
