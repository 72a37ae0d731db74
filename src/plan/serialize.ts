// Writing a plan: compact JSON (plans for large clusters are big), atomically and durably (a temp file,
// fsync'd, renamed over the target, so a reader never sees half a plan and a failed write or a crash leaves
// the old file intact). Every file fsm writes whole goes through writeAtomically (a plan through its streamed
// form, writePlan).
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { sealedHead, writeSealed } from "./content-hash.js";
import type { Plan } from "./plan.js";

/** The plan file's text, sealed with its content hash (content-hash.ts). */
export function planToJson(plan: Plan): string {
  const body: string[] = [];
  const head = writeSealed(plan, (p) => body.push(p));
  return `${head}${body.join("")}\n`;
}

/** Writes the plan to `path`; returns the bytes written. Streamed: each piece is written as it is made (a
 *  deep model's plan is longer than the longest string V8 makes, and holding its text would double the heap
 *  compile peaks at), and the head, which carries the hash of everything after it, last, into the room left
 *  for it. */
export function writePlan(path: string, plan: Plan): number {
  return writeAtomicallyWith(path, (fd) => {
    const room = Buffer.byteLength(sealedHead(plan, "0".repeat(64)));
    let bytes = writeSync(fd, " ".repeat(room));
    const head = writeSealed(plan, (p) => {
      bytes += writeSync(fd, p);
    });
    bytes += writeSync(fd, "\n");
    if (Buffer.byteLength(head) !== room) throw new Error(`internal: the plan's head is ${Buffer.byteLength(head)} bytes, ${room} were left for it`);
    writeSync(fd, head, 0);
    return bytes;
  });
}

/** Writes `text` (or its pieces, in order) to `path` through a temp file renamed over it; returns the bytes
 *  written. Durable as well as atomic: the bytes are fsync'd before the rename publishes them and the
 *  directory after, so a crash or power loss at any moment leaves the old file or the new one whole (a
 *  checkpoint's manifest relies on it). */
export function writeAtomically(path: string, text: string | readonly string[]): number {
  return writeAtomicallyWith(path, (fd) => {
    let bytes = 0;
    for (const piece of typeof text === "string" ? [text] : text) bytes += writeSync(fd, piece);
    return bytes;
  });
}

/** writeAtomically with the temp file's contents written by `write` (returning the bytes it wrote). */
function writeAtomicallyWith(path: string, write: (fd: number) => number): number {
  // Same directory as the target: rename is atomic only within one file system.
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  let bytes: number;
  try {
    const fd = openSync(temp, "w");
    try {
      bytes = write(fd);
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
