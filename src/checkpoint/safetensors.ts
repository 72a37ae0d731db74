// The safetensors file format (github.com/huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of JSON — {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}} —
// then the tensors' bytes, back to back, offsets relative to the end of the header; fsm records every tensor's
// checksum in the metadata (checksum.ts). Written atomically (temporary file, fsync, rename) so an interrupted
// write never leaves a file that looks whole; read with every offset, size, dtype and checksum checked.
import { checkChecksum, checksumMetadata, checksumOf, recordedChecksum } from "./checksum.js";
import { closeSync, fstatSync, fsyncSync, openSync, readFileSync, readSync, renameSync, rmSync, writeSync } from "node:fs";

export type SafeDType = "F32" | "I32" | "BF16" | "F16";
/** Bytes per element of each dtype. */
export const SAFE_BYTES: Readonly<Record<SafeDType, number>> = { F32: 4, I32: 4, BF16: 2, F16: 2 };

export interface SafeTensor {
  readonly dtype: SafeDType;
  readonly shape: readonly number[];
  /** Raw little-endian bytes. */
  readonly data: Uint8Array;
}

export class SafetensorsError extends Error {}

/** Writes `path` atomically: `path.tmp-PID`, fsync, rename. */
export function writeSafetensors(path: string, tensors: ReadonlyMap<string, SafeTensor>, metadata: Readonly<Record<string, string>> = {}): void {
  writeSafetensorsStreaming(path, [...tensors].map(([name, t]) => ({ name, dtype: t.dtype, shape: t.shape })), (name) => tensors.get(name)!.data, metadata);
}

/** A tensor's name and type, its bytes supplied later. */
export interface SafeTensorInfo {
  readonly name: string;
  readonly dtype: SafeDType;
  readonly shape: readonly number[];
}

/** Writes `path` atomically from the tensors' types, asking `data(name)` for each one's bytes in order, so a
 *  writer holds one tensor at a time rather than the file. Every tensor's checksum goes into the metadata
 *  (checksum.ts): the header is written first with placeholders of the same width, then rewritten in place
 *  once the data has streamed through, so the data is read once. */
export function writeSafetensorsStreaming(path: string, tensors: readonly SafeTensorInfo[], data: (name: string) => NodeJS.TypedArray, metadata: Readonly<Record<string, string>> = {}): void {
  const sizes = tensors.map((t) => t.shape.reduce((a, b) => a * b, 1) * SAFE_BYTES[t.dtype]);
  const crcs = new Map(tensors.map((t) => [t.name, 0]));
  const render = (): Buffer => {
    const header: Record<string, unknown> = { __metadata__: { ...metadata, ...checksumMetadata(crcs) } };
    let at = 0;
    tensors.forEach((t, i) => {
      header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + sizes[i]!] };
      at += sizes[i]!;
    });
    const json = JSON.stringify(header);
    return Buffer.from(json + " ".repeat((8 - (Buffer.byteLength(json) % 8)) % 8)); // the format pads the header to a multiple of 8
  };
  const json = render();
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(json.length));
  const tmp = `${path}.tmp-${process.pid}`;
  let fd: number | undefined;
  try {
    fd = openSync(tmp, "w");
    writeSync(fd, head);
    writeSync(fd, json);
    tensors.forEach((t, i) => {
      const bytes = data(t.name);
      if (bytes.byteLength !== sizes[i]) throw new Error(`internal: tensor ${t.name} has ${bytes.byteLength} bytes for shape [${t.shape}] ${t.dtype}`);
      crcs.set(t.name, checksumOf(bytes));
      writeSync(fd!, bytes);
    });
    const final = render();
    if (final.length !== json.length) throw new Error(`internal: the header of ${path} changed length with its checksums`);
    writeSync(fd, final, 0, final.length, 8);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, path);
  } catch (e) {
    // No half-written file is left behind (a failed read of a piece, a full disk, a directory in the way).
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
}

export interface SafeHeaderEntry {
  readonly dtype: SafeDType;
  readonly shape: number[];
  readonly data_offsets: [number, number];
}

/** A file's header and where its data starts, read without the data: every tensor's dtype, size and byte
 *  range checked against its shape and the file's size. Checkpoints read rank files this way, then only the
 *  byte ranges they need (rank-file.ts). */
export function readSafetensorsHeader(path: string): { tensors: Record<string, SafeHeaderEntry>; metadata: Record<string, string>; dataStart: number } {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new SafetensorsError(`cannot read ${path}: ${(e as Error).message}`);
  }
  const fail = (why: string): never => {
    throw new SafetensorsError(`${path} is not a valid safetensors file: ${why}`);
  };
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) fail(stat.isDirectory() ? "it is a directory" : "it is not a regular file");
    const size = stat.size;
    const len = Buffer.alloc(8);
    if (readSync(fd, len, 0, 8, 0) !== 8) fail("shorter than its 8-byte header length");
    const n = Number(len.readBigUInt64LE(0));
    if (8 + n > size) fail(`its header claims ${n} bytes but the file has ${size - 8} after the length (truncated?)`);
    const text = Buffer.alloc(n);
    readSync(fd, text, 0, n, 8);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(text.toString("utf8")) as Record<string, unknown>;
    } catch {
      return fail("its header is not JSON");
    }
    const { __metadata__: metadata, ...rest } = header;
    const tensors = rest as Record<string, SafeHeaderEntry>;
    for (const [name, t] of Object.entries(tensors)) {
      if (!(t.dtype in SAFE_BYTES)) fail(`tensor ${name} has dtype ${t.dtype}`);
      const [a, b] = t.data_offsets ?? [];
      const bytes = (t.shape ?? []).reduce((x, y) => x * y, 1) * SAFE_BYTES[t.dtype];
      if (!Number.isInteger(a) || !Number.isInteger(b) || b! - a! !== bytes) fail(`tensor ${name}'s data [${a}, ${b}) is not its shape [${t.shape}] of ${t.dtype}`);
      if (8 + n + b! > size) throw new SafetensorsError(`${path}: tensor ${name}'s data [${a}, ${b}) lies outside the file (truncated?)`);
    }
    return { tensors, metadata: (metadata ?? {}) as Record<string, string>, dataStart: 8 + n };
  } finally {
    closeSync(fd);
  }
}

/** The whole file: its header (checked as readSafetensorsHeader does) and every tensor's bytes. */
export function readSafetensors(path: string): { tensors: Map<string, SafeTensor>; metadata: Record<string, string> } {
  const { tensors, metadata, dataStart } = readSafetensorsHeader(path);
  const body = readFileSync(path).subarray(dataStart);
  for (const [name, t] of Object.entries(tensors)) checkChecksum(path, name, recordedChecksum(path, metadata, name), checksumOf(body.subarray(...t.data_offsets)));
  return { tensors: new Map(Object.entries(tensors).map(([name, t]) => [name, { dtype: t.dtype, shape: t.shape, data: body.subarray(...t.data_offsets) }])), metadata };
}
