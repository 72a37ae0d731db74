// Where every element of a checkpoint's tensors lives: its rank files' headers read (not their data), the
// fp32 pieces grouped by whole-tensor name — a tensor-parallel plan's by slice too, joined into the whole
// tensor when read (split-pieces.ts). Consolidating and resharding both read whole tensors through this, one
// at a time, so memory is bounded by the largest tensor, not the model.
import { checkChecksum, checksumOf, recordedChecksum, verifyRange } from "./checksum.js";
import { CheckpointError, type Manifest } from "./manifest.js";
import { openRankFile, readBytes, readInto } from "./rank-file.js";
import { joinSlices, parseSplit, wholeNumel, type SliceOf } from "./split-pieces.js";

interface Piece {
  readonly file: string;
  /** The tensor's name in its file (a parameter, `param.role`, or either with `#k`). */
  readonly stored: string;
  /** Absolute byte offset of its data in the file. */
  readonly offset: number;
  readonly from: number;
  readonly count: number;
  /** Its recorded checksum (undefined: the file records none). */
  readonly crc: number | undefined;
  /** Checked once, before (or as) its bytes are first used. */
  verified: boolean;
}

export interface CheckpointPieces {
  /** Whether some rank holds part of the fp32 tensor `name` (a parameter or `param.role`). */
  has(name: string): boolean;
  /** The whole tensor of `numel` elements, assembled from its pieces (into `into` when given: a reused buffer
   *  keeps memory at one tensor whatever the garbage collector does); an element no rank holds is an error. */
  read(name: string, numel: number, into?: Float32Array): Float32Array;
  /** Elements [from, from + count) of tensor `name` into `into` at `at`, read straight from the files' byte
   *  ranges that overlap them; an element no rank holds is an error. Every piece read is checked against its
   *  checksum: one read whole as it is read, one read in part by a pass over it first. */
  readRange(name: string, from: number, count: number, into: Float32Array, at: number): void;
  /** The optimizer's step counter as saved (raw bytes and dtype), from the first rank that has one. */
  readonly step?: { readonly dtype: string; readonly data: Buffer };
  /** The rank files without checksums (written by an fsm before them): read unverified. */
  readonly unverified: readonly string[];
}

export function openPieces(dir: string, m: Manifest): CheckpointPieces {
  // Keyed by tensor name, or for a tensor-parallel slice by `name|rank` (rank of its split, in `splits`).
  const pieces = new Map<string, Piece[]>();
  const splits = new Map<string, { split: SliceOf; file: string }>();
  let step: CheckpointPieces["step"];
  const unverified: string[] = [];
  for (let d = 0; d < m.devices; d++) {
    const { path: file, tensors, metadata, dataStart, checksummed } = openRankFile(dir, m, d);
    if (!checksummed) unverified.push(file);
    for (const [stored, t] of Object.entries(tensors)) {
      if (stored === "optimizer.step" && step === undefined) {
        const data = readBytes(file, dataStart + t.data_offsets[0], t.data_offsets[1] - t.data_offsets[0]);
        checkChecksum(file, stored, recordedChecksum(file, metadata, stored), checksumOf(data));
        step = { dtype: t.dtype, data };
      }
      const range = metadata[`range:${stored}`];
      if (range === undefined || t.dtype !== "F32") continue; // 16-bit compute copies derive from the fp32 weights
      const [from, count] = range.split(",").map(Number) as [number, number];
      const name = stored.replace(/#\d+$/, ""); // the same weight held twice by one device
      if (t.data_offsets[1] - t.data_offsets[0] !== 4 * count) throw new CheckpointError(`${file}: ${stored} has ${t.data_offsets[1] - t.data_offsets[0]} bytes for ${count} elements`);
      const crc = recordedChecksum(file, metadata, stored);
      const splitText = metadata[`split:${stored}`];
      let key = name;
      if (splitText !== undefined) {
        const split = parseSplit(splitText, file, stored);
        const seen = splits.get(name);
        if (seen && (seen.split.parts !== split.parts || seen.split.axis !== split.axis || seen.split.shape.join() !== split.shape.join() || seen.split.blocks.join() !== split.blocks.join())) {
          throw new CheckpointError(`${file}: ${stored} is split as ${splitText}, ${seen.file} splits ${name} otherwise`);
        }
        splits.set(name, { split, file });
        key = `${name}|${split.rank}`;
      }
      pieces.set(key, [...(pieces.get(key) ?? []), { file, stored, offset: dataStart + t.data_offsets[0], from, count, crc, verified: crc === undefined }]);
    }
  }
  // Elements of one stored tensor (a whole one, or one rank's slice).
  const readStored = (name: string, from: number, count: number, into: Float32Array, at: number): void => {
    const list = pieces.get(name);
    if (!list) throw new CheckpointError(`${dir}: no rank holds any of ${name}`);
    const target = Buffer.from(into.buffer, into.byteOffset + 4 * at, 4 * count);
    const covered = new Uint8Array(count);
    for (const p of list) {
      const lo = Math.max(from, p.from);
      const hi = Math.min(from + count, p.from + p.count);
      if (lo >= hi) continue;
      const whole = lo === p.from && hi === p.from + p.count;
      if (!p.verified && !whole) verifyRange(p.file, p.stored, p.crc, p.offset, 4 * p.count);
      readInto(p.file, p.offset + 4 * (lo - p.from), target, 4 * (lo - from), 4 * (hi - lo));
      if (!p.verified && whole) checkChecksum(p.file, p.stored, p.crc, checksumOf(target.subarray(4 * (lo - from), 4 * (hi - from))));
      p.verified = true;
      covered.fill(1, lo - from, hi - from);
    }
    const gap = covered.indexOf(0);
    if (gap >= 0) throw new CheckpointError(`${dir}: no rank holds element ${from + gap} of ${name.replace("|", " slice ")}`);
  };
  // A split tensor is joined whole from its slices once and kept until another is asked for: readers go
  // tensor by tensor (or slot by slot, a few tensors each), so memory stays about one tensor.
  let joined: { name: string; data: Float32Array } | undefined;
  const wholeOf = (name: string, split: SliceOf): Float32Array => {
    if (joined?.name === name) return joined.data;
    const per = wholeNumel(split) / split.parts;
    const slices = Array.from({ length: split.parts }, (_, r) => {
      const slice = new Float32Array(per);
      readStored(`${name}|${r}`, 0, per, slice, 0);
      return slice;
    });
    joined = { name, data: joinSlices(slices, split) };
    return joined.data;
  };
  const readRange: CheckpointPieces["readRange"] = (name, from, count, into, at) => {
    const split = splits.get(name)?.split;
    if (!split) return readStored(name, from, count, into, at);
    if (from + count > wholeNumel(split)) throw new CheckpointError(`${dir}: elements [${from}, ${from + count}) lie outside ${name}'s ${wholeNumel(split)}`);
    into.set(wholeOf(name, split).subarray(from, from + count), at);
  };
  return {
    has: (name) => pieces.has(name) || splits.has(name),
    read: (name, numel, into = new Float32Array(numel)) => {
      const split = splits.get(name)?.split;
      if (split && wholeNumel(split) !== numel) throw new CheckpointError(`${splits.get(name)!.file}: ${name} is split from a whole of ${wholeNumel(split)} elements, not ${numel}`);
      for (const p of pieces.get(name) ?? []) {
        if (p.from + p.count > numel) throw new CheckpointError(`${p.file}: ${name}'s piece [${p.from}, ${p.from + p.count}) lies outside its ${numel} elements`);
      }
      readRange(name, 0, numel, into, 0);
      return into;
    },
    readRange,
    ...(step && { step }),
    unverified,
  };
}
