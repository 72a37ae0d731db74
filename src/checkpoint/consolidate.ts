// `fsm consolidate DIR -o model.safetensors [--optimizer]`: the sharded checkpoint's fp32 weights (and with
// --optimizer their optimizer state) merged into one safetensors file with full shapes. Streaming: rank files
// are read header first and then only the byte ranges of the tensor being assembled (pieces.ts), and the
// output is written one tensor at a time, so memory is bounded by the largest tensor, not the model. Every
// element of every tensor must be covered by some rank's piece; the output is written atomically.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { fsyncDir } from "./durable.js";
import { CheckpointError, readManifest } from "./manifest.js";
import { openPieces } from "./pieces.js";

export function consolidate(dir: string, output: string, options: { optimizer?: boolean } = {}): { tensors: number; bytes: number } {
  const m = readManifest(dir);
  if (!m.params) throw new CheckpointError(`${dir}: this checkpoint records no parameter shapes (written by an older fsm): it cannot be consolidated`);
  const pieces = openPieces(dir, m);
  const names = Object.keys(m.params).flatMap((p) => [p, ...(options.optimizer ? (m.roles ?? []).map((r) => `${p}.${r}`) : [])]);
  const shapeOf = (name: string): readonly number[] => m.params![name] ?? m.params![name.slice(0, name.lastIndexOf("."))]!;
  const numel = (name: string): number => shapeOf(name).reduce((a, b) => a * b, 1);
  const header: Record<string, unknown> = { __metadata__: { format: "fsm-consolidated", model: m.model, step: String(m.step) } };
  let at = 0;
  for (const name of names) {
    if (!pieces.has(name)) throw new CheckpointError(`${dir}: no rank holds any of ${name}`);
    header[name] = { dtype: "F32", shape: shapeOf(name), data_offsets: [at, at + 4 * numel(name)] };
    at += 4 * numel(name);
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
    for (const name of names) writeSync(out, pieces.read(name, numel(name)));
    fsyncSync(out);
  } catch (e) {
    closeSync(out);
    rmSync(temp, { force: true });
    throw e;
  }
  closeSync(out);
  renameSync(temp, output);
  fsyncDir(dirname(output));
  return { tensors: names.length, bytes: at };
}
