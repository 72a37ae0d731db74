// A rank file read in pieces: its safetensors header (every tensor's byte range checked against the file's
// size) without the data, then exactly the byte ranges wanted, straight into their destination. Resuming,
// resharding and consolidating read checkpoints this way, so none holds a whole file in memory.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { CheckpointError } from "./manifest.js";

export interface HeaderEntry {
  readonly dtype: string;
  readonly shape: number[];
  readonly data_offsets: [number, number];
}

/** A rank file's header and where its data starts, read without the data; offsets checked against the size. */
export function readHeader(path: string): { tensors: Record<string, HeaderEntry>; metadata: Record<string, string>; dataStart: number } {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new CheckpointError(`cannot read ${path}: ${(e as Error).message}`);
  }
  try {
    const size = fstatSync(fd).size;
    const len = Buffer.alloc(8);
    if (readSync(fd, len, 0, 8, 0) !== 8) throw new CheckpointError(`${path} is not a valid safetensors file: shorter than its header length`);
    const n = Number(len.readBigUInt64LE(0));
    if (8 + n > size) throw new CheckpointError(`${path} is not a valid safetensors file: truncated header`);
    const text = Buffer.alloc(n);
    readSync(fd, text, 0, n, 8);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(text.toString("utf8")) as Record<string, unknown>;
    } catch {
      throw new CheckpointError(`${path} is not a valid safetensors file: its header is not JSON`);
    }
    const { __metadata__: metadata, ...rest } = header;
    const tensors = rest as Record<string, HeaderEntry>;
    for (const [name, t] of Object.entries(tensors)) {
      const [a, b] = t.data_offsets ?? [];
      if (!Number.isInteger(a) || !Number.isInteger(b) || b! < a! || 8 + n + b! > size) throw new CheckpointError(`${path}: tensor ${name}'s data [${a}, ${b}) lies outside the file (truncated?)`);
    }
    return { tensors, metadata: (metadata ?? {}) as Record<string, string>, dataStart: 8 + n };
  } finally {
    closeSync(fd);
  }
}

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
