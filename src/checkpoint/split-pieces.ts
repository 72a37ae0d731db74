// Tensor-parallel slices in checkpoints. A rank of a tensor-parallel plan holds a slice of each split
// parameter (and of its optimizer state); its rank file stores that slice's pieces with element ranges of the
// slice, and says which slice it is in the metadata (`split:NAME`: rank, parts, axis, blocks, whole shape).
// Reading a whole tensor joins its slices (pieces.ts); writing into a tensor-parallel plan cuts each rank's
// slice from the whole (reshard.ts, lower/param-pieces.ts rankSlices) — so a checkpoint moves between any
// tensor-parallel degrees.
import { joinRanks } from "../graph/param-split.js";
import type { ParamSplit } from "../graph/graph.js";
import { CheckpointError } from "./manifest.js";

/** Which slice of a whole tensor a stored tensor is. */
export interface SliceOf extends ParamSplit {
  readonly rank: number;
  /** The whole tensor's shape. */
  readonly shape: readonly number[];
}

export function splitText(s: SliceOf): string {
  return JSON.stringify({ rank: s.rank, parts: s.parts, axis: s.axis, blocks: s.blocks, shape: s.shape });
}

const count = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 0;

/** The metadata's slice, checked: a corrupt entry is an error naming the file and tensor. */
export function parseSplit(text: string, file: string, name: string): SliceOf {
  let s: Partial<SliceOf> | undefined;
  try {
    s = JSON.parse(text) as Partial<SliceOf>;
  } catch {
    // reported below
  }
  const ok =
    s !== undefined &&
    count(s.parts) && s.parts > 0 && count(s.rank) && s.rank < s.parts &&
    Array.isArray(s.shape) && s.shape.every(count) && count(s.axis) && s.axis < s.shape.length &&
    Array.isArray(s.blocks) && s.blocks.every((b) => count(b) && b % s!.parts! === 0) &&
    s.blocks.reduce((a, b) => a + b, 0) === s.shape[s.axis];
  if (!ok) throw new CheckpointError(`${file}: ${name}'s tensor-parallel slice is malformed (split:${name} = ${text})`);
  return s as SliceOf;
}

export const wholeNumel = (s: SliceOf): number => s.shape.reduce((a, b) => a * b, 1);

/** The whole tensor from every rank's slice (rank order). */
export function joinSlices(slices: readonly Float32Array[], s: SliceOf): Float32Array {
  return Float32Array.from(joinRanks(slices, s.shape, s));
}

