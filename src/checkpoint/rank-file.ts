// A rank file read in pieces: its safetensors header first (readSafetensorsHeader), then exactly the byte
// ranges wanted, straight into their destination. Resuming, resharding and consolidating read checkpoints
// this way, so none holds a whole file in memory.
import { closeSync, openSync, readSync } from "node:fs";
import { CheckpointError } from "./manifest.js";

export function readBytes(file: string, offset: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  readInto(file, offset, out, 0, length);
  return out;
}

/** `length` bytes of `file` from `offset` into `out` at `at` (no intermediate copy: pieces go straight home). */
export function readInto(file: string, offset: number, out: Buffer, at: number, length: number): void {
  const fd = openSync(file, "r");
  try {
    if (readSync(fd, out, at, length, offset) !== length) throw new CheckpointError(`${file} is truncated`);
  } finally {
    closeSync(fd);
  }
}
