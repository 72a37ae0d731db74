// Writing a plan: compact JSON (plans for large clusters are big), atomically (a temp file renamed over the
// target, so a reader never sees half a plan and a failed write leaves the old file intact).
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Plan } from "./plan.js";

export function planToJson(plan: Plan): string {
  return JSON.stringify(plan) + "\n";
}

/** Writes the plan to `path`; returns the bytes written. */
export function writePlan(path: string, plan: Plan): number {
  return writeAtomically(path, planToJson(plan));
}

/** Writes `text` to `path` through a temp file renamed over it; returns the bytes written. */
export function writeAtomically(path: string, text: string): number {
  // Same directory as the target: rename is atomic only within one file system.
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    writeFileSync(temp, text);
    renameSync(temp, path);
  } catch (e) {
    rmSync(temp, { force: true });
    throw e;
  }
  return Buffer.byteLength(text);
}
