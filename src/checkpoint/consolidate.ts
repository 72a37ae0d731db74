// `fsm consolidate DIR -o model.safetensors [--optimizer]`: the sharded checkpoint's fp32 weights (and with
// --optimizer their optimizer state) merged into one safetensors file with full shapes. Streaming: rank files
// are read header first and then only the byte ranges of the tensor being assembled (pieces.ts), and the
// output is written one tensor at a time, so memory is bounded by the largest tensor, not the model. Every
// element of every tensor must be covered by some rank's piece, and every piece read must match its
// checksum; the output is written atomically, and never into the checkpoint it reads.
import { realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, sep } from "node:path";
import { fsyncDir } from "../plan/serialize.js";
import { CheckpointError, readManifest } from "./manifest.js";
import { openPieces } from "./pieces.js";
import { writeSafetensorsStreaming } from "./safetensors.js";

/** The output path is at fault, not the checkpoint: the message is about `-o` (the caller names the path). */
export class OutputError extends Error {}

export function consolidate(dir: string, output: string, options: { optimizer?: boolean } = {}): { tensors: number; bytes: number; unverified: readonly string[] } {
  const m = readManifest(dir);
  checkOutput(dir, output);
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
  try {
    writeSafetensorsStreaming(output, infos, (name) => pieces.read(name, numel(name), scratch.subarray(0, numel(name))), { format: "fsm-consolidated", model: m.model, step: String(m.step) });
    fsyncDir(dirname(output));
  } catch (e) {
    // Reading errors are CheckpointErrors; what the system refuses here is writing the output.
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === "string") throw new OutputError(`-o: cannot write: ${(e as Error).message.split(",")[0]}`);
    throw e;
  }
  return { tensors: names.length, bytes: names.reduce((n, name) => n + 4 * numel(name), 0), unverified: pieces.unverified };
}

/** The output must be a file name in an existing directory, and not one of the checkpoint's own files: the
 *  manifest, or anything in a step directory (replacing a rank file would destroy the checkpoint). The
 *  directory is resolved through symlinks; the name is not, since the rename replaces a symlink itself. */
function checkOutput(dir: string, output: string): void {
  const kind = statOrUndefined(output);
  if (kind?.isDirectory()) throw new OutputError(`-o is a directory: give a file name (e.g. ${join(output, "model.safetensors")})`);
  const parent = dirname(output);
  const parentKind = statOrUndefined(parent);
  if (!parentKind) throw new OutputError(`-o: directory ${parent} does not exist`);
  if (!parentKind.isDirectory()) throw new OutputError(`-o: ${parent} is not a directory`);
  const where = relative(realpathSync(dir), join(realpathSync(parent), basename(output)));
  const inside = where !== "" && !where.startsWith("..") && !isAbsolute(where);
  if (inside && (where === "latest.json" || where.split(sep)[0]!.startsWith("step-"))) {
    throw new OutputError(`-o is inside the checkpoint ${dir} that it reads (${where}): writing it would destroy the checkpoint; write elsewhere`);
  }
}

function statOrUndefined(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}
