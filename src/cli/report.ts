// Prints diagnostics with code frames and a one-line tally; shared by every command that compiles a file.
import { formatDiagnostics } from "../diagnostics/code-frame.js";
import type { Diagnostic } from "../diagnostics/diagnostic.js";
import type { CliIO } from "./io.js";

export function reportDiagnostics(io: CliIO, diags: readonly Diagnostic[], sources: ReadonlyMap<string, string>): void {
  if (diags.length === 0) return;
  io.stderr(formatDiagnostics(diags, (f) => sources.get(f)) + "\n");
  const errors = diags.filter((d) => d.severity === "error").length;
  const warnings = diags.filter((d) => d.severity === "warning").length;
  const parts = [];
  if (errors > 0) parts.push(`${errors} error${errors === 1 ? "" : "s"}`);
  if (warnings > 0) parts.push(`${warnings} warning${warnings === 1 ? "" : "s"}`);
  io.stderr(`${parts.join(", ")}\n`);
}

/** The error for a file that checks but defines no model (only blocks, for other files to import): located
 *  at the file's start, since there is no line to point at. */
export function reportNoModel(io: CliIO, file: string, verb: string, diags: readonly Diagnostic[]): void {
  if (diags.some((d) => d.severity === "error")) return;
  io.stderr(`${file}:1:1: error: no model to ${verb}: the file defines only blocks (a library for other files to import); add a 'model NAME { ... }'\n`);
}
