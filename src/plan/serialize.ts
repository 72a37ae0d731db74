// Writing a plan: compact JSON (plans for large clusters are big), atomically and durably (a temp file,
// fsync'd, renamed over the target, so a reader never sees half a plan and a failed write or a crash leaves
// the old file intact). Every file fsm writes whole goes through writeAtomically.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { withHashPieces } from "./content-hash.js";
import type { Plan } from "./plan.js";

/** The plan file's text, sealed with its content hash (content-hash.ts). */
export function planToJson(plan: Plan): string {
  return planPieces(plan).join("");
}

function planPieces(plan: Plan): string[] {
  return [...withHashPieces(plan), "\n"];
}

/** Writes the plan to `path`; returns the bytes written. In pieces: a deep model's plan is longer than the
 *  longest string V8 makes. */
export function writePlan(path: string, plan: Plan): number {
  return writeAtomically(path, planPieces(plan));
}

/** Writes `text` (or its pieces, in order) to `path` through a temp file renamed over it; returns the bytes
 *  written. Durable as well as atomic: the bytes are fsync'd before the rename publishes them and the
 *  directory after, so a crash or power loss at any moment leaves the old file or the new one whole (a
 *  checkpoint's manifest relies on it). */
export function writeAtomically(path: string, text: string | readonly string[]): number {
  // Same directory as the target: rename is atomic only within one file system.
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  let bytes = 0;
  try {
    const fd = openSync(temp, "w");
    try {
      for (const piece of typeof text === "string" ? [text] : text) bytes += writeSync(fd, piece);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (e) {
    rmSync(temp, { force: true });
    throw e;
  }
  fsyncDir(dirname(path));
  return bytes;
}

/** fsync a directory: makes renames and new entries in it durable (Linux; a no-op where unsupported). */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // Some platforms cannot open or fsync a directory; the data itself was fsync'd.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
