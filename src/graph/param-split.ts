// The values of a tensor-parallel rank's parameter from the whole one and back (ParamSplit, graph.ts): what
// initialisation, checkpoints and the parity tests use to move between one rank's slice and the model.
import type { ParamSplit } from "./graph.js";

/** Element strides of a row-major shape around `axis`: how many blocks lie before it and how many elements
 *  one step along it spans (one block, the axis and after, is `shape[axis]·inner`). Shared by everything that
 *  moves a tensor-parallel rank's part along an axis: parameters here, values in the interpreter and lowering. */
export function aroundAxis(shape: readonly number[], axis: number): { outer: number; inner: number } {
  let outer = 1;
  let inner = 1;
  shape.forEach((n, i) => {
    if (i < axis) outer *= n;
    if (i > axis) inner *= n;
  });
  return { outer, inner };
}

/** For each block of the split axis: where it starts in the whole and in a rank's slice, and how long the
 *  rank's part of it is. */
function segments(split: ParamSplit, rank: number): { whole: number; local: number; length: number }[] {
  let whole = 0;
  let local = 0;
  return split.blocks.map((block) => {
    const length = block / split.parts;
    const s = { whole: whole + rank * length, local, length };
    whole += block;
    local += length;
    return s;
  });
}

/** Shape of the whole parameter a rank holds a slice of. */
export function wholeShape(shape: readonly number[], split: ParamSplit): number[] {
  return shape.map((n, i) => (i === split.axis ? n * split.parts : n));
}

/** Shape of rank k's slice. */
export function splitShape(shape: readonly number[], split: ParamSplit): number[] {
  return shape.map((n, i) => (i === split.axis ? n / split.parts : n));
}

/** Rank `rank`'s slice of a whole parameter's values (row-major, `shape`). */
export function sliceForRank(whole: ArrayLike<number>, shape: readonly number[], split: ParamSplit, rank: number): Float64Array {
  const { outer, inner } = aroundAxis(shape, split.axis);
  const n = shape[split.axis]!;
  const m = n / split.parts;
  const out = new Float64Array(outer * m * inner);
  for (const s of segments(split, rank)) {
    for (let o = 0; o < outer; o++) {
      for (let r = 0; r < s.length; r++) {
        const from = (o * n + s.whole + r) * inner;
        const to = (o * m + s.local + r) * inner;
        for (let e = 0; e < inner; e++) out[to + e] = whole[from + e]!;
      }
    }
  }
  return out;
}

/** The whole parameter from every rank's slice, in rank order (the inverse of sliceForRank). */
export function joinRanks(slices: readonly ArrayLike<number>[], shape: readonly number[], split: ParamSplit): Float64Array {
  const { outer, inner } = aroundAxis(shape, split.axis);
  const n = shape[split.axis]!;
  const m = n / split.parts;
  const out = new Float64Array(outer * n * inner);
  slices.forEach((slice, rank) => {
    for (const s of segments(split, rank)) {
      for (let o = 0; o < outer; o++) {
        for (let r = 0; r < s.length; r++) {
          const from = (o * m + s.local + r) * inner;
          const to = (o * n + s.whole + r) * inner;
          for (let e = 0; e < inner; e++) out[to + e] = slice[from + e]!;
        }
      }
    }
  });
  return out;
}
