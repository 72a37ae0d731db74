// `fsm consolidate DIR -o model.safetensors [--optimizer]`: the sharded checkpoint's fp32 weights (and with
// --optimizer their optimizer state) merged into one safetensors file with full shapes. Streaming: rank files
// are read header first and then only the byte ranges of the tensor being assembled (pieces.ts), and the
// output is written one tensor at a time, so memory is bounded by the largest tensor, not the model. Every
// element of every tensor must be covered by some rank's piece; the output is written atomically.
import { dirname } from "node:path";
import { fsyncDir } from "../plan/serialize.js";
import { CheckpointError, readManifest } from "./manifest.js";
import { openPieces } from "./pieces.js";
import { writeSafetensorsStreaming } from "./safetensors.js";

export function consolidate(dir: string, output: string, options: { optimizer?: boolean } = {}): { tensors: number; bytes: number } {
  const m = readManifest(dir);
  if (!m.params) throw new CheckpointError(`${dir}: this checkpoint records no parameter shapes (written by an older fsm): it cannot be consolidated`);
  const pieces = openPieces(dir, m);
  const names = Object.keys(m.params).flatMap((p) => [p, ...(options.optimizer ? (m.roles ?? []).map((r) => `${p}.${r}`) : [])]);
  const shapeOf = (name: string): readonly number[] => m.params![name] ?? m.params![name.slice(0, name.lastIndexOf("."))]!;
  const numel = (name: string): number => shapeOf(name).reduce((a, b) => a * b, 1);
  for (const name of names) if (!pieces.has(name)) throw new CheckpointError(`${dir}: no rank holds any of ${name}`);
  const infos = names.map((name) => ({ name, dtype: "F32" as const, shape: shapeOf(name) }));
  // One buffer of the largest tensor, reused for each: fresh ones per tensor wait for the garbage collector,
  // which let resident memory grow to several tensors (measured 40–150 MiB for 16 MiB tensors).
  const scratch = new Float32Array(Math.max(0, ...names.map(numel)));
  writeSafetensorsStreaming(output, infos, (name) => pieces.read(name, numel(name), scratch.subarray(0, numel(name))), { format: "fsm-consolidated", model: m.model, step: String(m.step) });
  fsyncDir(dirname(output));
  return { tensors: names.length, bytes: names.reduce((n, name) => n + 4 * numel(name), 0) };
}
