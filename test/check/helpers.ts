// Test helper: check in-memory .fsm sources (path → text) without touching the file system.
import { resolve } from "node:path";
import { checkFile, type CheckOptions, type CheckResult } from "../../src/check/check.js";

export function checkSources(files: Record<string, string>, root = Object.keys(files)[0]!, options: CheckOptions = {}): CheckResult {
  const byAbs = new Map(Object.entries(files).map(([p, t]) => [resolve(p), t]));
  return checkFile(root, { ...options, host: { readFile: (p) => byAbs.get(p) } });
}

export function codes(r: CheckResult): string[] {
  return r.diagnostics.map((d) => `${d.code} ${d.span.line}:${d.span.column}`);
}

/** A minimal valid model around the given members and forward body. */
export function model(members: string, body: string, inputs = "x: f32[B, 4], y: f32[B, 4]"): string {
  return `model m {\n${members}\n  forward(${inputs}) {\n${body}\n  }\n}\n`;
}
