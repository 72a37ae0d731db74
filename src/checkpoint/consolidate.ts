// `fsm consolidate DIR -o model.safetensors [--optimizer]`: the sharded checkpoint's fp32 weights (and with
// --optimizer their optimizer state) merged into one safetensors file with full shapes. Streaming: rank files
// are read header first and then only the byte ranges of the tensor being assembled, and the output is
// written one tensor at a time, so memory is bounded by the largest tensor, not the model. Every element of
// every tensor must be covered by some rank's piece; the output is written atomically.
import { closeSync, fsyncSync, openSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { CheckpointError, readManifest } from "./checkpoint.js";

interface Piece {
  readonly file: string;
  /** Absolute byte offset of its data in the file. */
  readonly offset: number;
  readonly from: number;
  readonly count: number;
}

/** A rank file's header and where its data starts, read without the data. */
function readHeader(path: string): { tensors: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>; metadata: Record<string, string>; dataStart: number } {
  const fd = openSync(path, "r");
  try {
    const len = Buffer.alloc(8);
    if (readSync(fd, len, 0, 8, 0) !== 8) throw new CheckpointError(`${path} is not a valid safetensors file: shorter than its header length`);
    const n = Number(len.readBigUInt64LE(0));
    const text = Buffer.alloc(n);
    if (readSync(fd, text, 0, n, 8) !== n) throw new CheckpointError(`${path} is not a valid safetensors file: truncated header`);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(text.toString("utf8")) as Record<string, unknown>;
    } catch {
      throw new CheckpointError(`${path} is not a valid safetensors file: its header is not JSON`);
    }
    const { __metadata__: metadata, ...tensors } = header;
    return { tensors: tensors as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>, metadata: (metadata ?? {}) as Record<string, string>, dataStart: 8 + n };
  } finally {
    closeSync(fd);
  }
}

export function consolidate(dir: string, output: string, options: { optimizer?: boolean } = {}): { tensors: number; bytes: number } {
  const m = readManifest(dir);
  if (!m.params) throw new CheckpointError(`${dir}: this checkpoint records no parameter shapes (written by an older fsm): it cannot be consolidated`);
  // Where every element of every saved tensor lives: pieces by tensor name, from every rank file.
  const pieces = new Map<string, Piece[]>();
  for (let d = 0; d < m.devices; d++) {
    const file = join(dir, m.dir, `rank-${String(d).padStart(5, "0")}.safetensors`);
    const { tensors, metadata, dataStart } = readHeader(file);
    for (const [stored, t] of Object.entries(tensors)) {
      const range = metadata[`range:${stored}`];
      if (range === undefined || t.dtype !== "F32") continue; // compute copies and the step counter
      const [from, count] = range.split(",").map(Number) as [number, number];
      const name = stored.replace(/#\d+$/, "");
      if (t.data_offsets[1] - t.data_offsets[0] !== 4 * count) throw new CheckpointError(`${file}: ${stored} has ${t.data_offsets[1] - t.data_offsets[0]} bytes for ${count} elements`);
      pieces.set(name, [...(pieces.get(name) ?? []), { file, offset: dataStart + t.data_offsets[0], from, count }]);
    }
  }
  const names = Object.keys(m.params).flatMap((p) => [p, ...(options.optimizer ? (m.roles ?? []).map((r) => `${p}.${r}`) : [])]);
  const shapeOf = (name: string): readonly number[] => m.params![name] ?? m.params![name.slice(0, name.lastIndexOf("."))]!;
  const header: Record<string, unknown> = { __metadata__: { format: "fsm-consolidated", model: m.model, step: String(m.step) } };
  let at = 0;
  for (const name of names) {
    if (!pieces.has(name)) throw new CheckpointError(`${dir}: no rank holds any of ${name}`);
    const bytes = 4 * shapeOf(name).reduce((a, b) => a * b, 1);
    header[name] = { dtype: "F32", shape: shapeOf(name), data_offsets: [at, at + bytes] };
    at += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const temp = `${output}.tmp-${process.pid}`;
  const out = openSync(temp, "w");
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
    writeSync(out, len);
    writeSync(out, Buffer.from(json));
    for (const name of names) {
      // One tensor in memory at a time, filled from its pieces; any gap is an error.
      const total = shapeOf(name).reduce((a, b) => a * b, 1);
      const full = Buffer.alloc(4 * total);
      const covered = new Uint8Array(total);
      for (const p of pieces.get(name)!) {
        const fd = openSync(p.file, "r");
        try {
          readSync(fd, full, 4 * p.from, 4 * p.count, p.offset);
        } finally {
          closeSync(fd);
        }
        covered.fill(1, p.from, p.from + p.count);
      }
      const gap = covered.indexOf(0);
      if (gap >= 0) throw new CheckpointError(`${dir}: no rank holds element ${gap} of ${name}`);
      writeSync(out, full);
    }
    fsyncSync(out);
  } catch (e) {
    closeSync(out);
    rmSync(temp, { force: true });
    throw e;
  }
  closeSync(out);
  renameSync(temp, output);
  return { tensors: names.length, bytes: at };
}
