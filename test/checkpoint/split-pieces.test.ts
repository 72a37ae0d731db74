// Tensor-parallel slices in checkpoints (src/checkpoint/split-pieces.ts): the metadata's text form read back
// and checked, and slices cut from and joined into whole tensors by hand-computed layouts.
import { describe, expect, it } from "vitest";
import { CheckpointError } from "../../src/checkpoint/manifest.js";
import { joinSlices, parseSplit, splitText, type SliceOf } from "../../src/checkpoint/split-pieces.js";
import { sliceForRank } from "../../src/graph/param-split.js";

const cutSlice = (whole: Float32Array, shape: readonly number[], split: SliceOf, rank: number): Float32Array => Float32Array.from(sliceForRank(whole, shape, split, rank));

describe("tensor-parallel slices in checkpoints", () => {
  // A fused qkv weight [6, 2]: blocks q, k, v of 2 rows each, split over 2 ranks along rows.
  const qkv: SliceOf = { rank: 1, parts: 2, axis: 0, blocks: [2, 2, 2], shape: [6, 2] };
  const whole = Float32Array.from({ length: 12 }, (_, i) => i);

  it("rank 1 holds the second row of each of q, k and v; the slices join back into the whole", () => {
    // Rows: q0 [0,1] q1 [2,3] | k0 [4,5] k1 [6,7] | v0 [8,9] v1 [10,11]; rank 1 takes q1, k1, v1.
    expect(Array.from(cutSlice(whole, qkv.shape, qkv, 1))).toEqual([2, 3, 6, 7, 10, 11]);
    expect(Array.from(cutSlice(whole, qkv.shape, qkv, 0))).toEqual([0, 1, 4, 5, 8, 9]);
    const slices = [0, 1].map((r) => cutSlice(whole, qkv.shape, qkv, r));
    expect(Array.from(joinSlices(slices, qkv))).toEqual(Array.from(whole));
  });

  it("the metadata text reads back as written", () => {
    expect(parseSplit(splitText(qkv), "rank-00001.safetensors", "qkv.weight")).toEqual(qkv);
  });

  it("a malformed or inconsistent slice is an error naming the file and the tensor", () => {
    const bad = [
      "not json",
      JSON.stringify({ ...qkv, rank: 2 }), // rank outside its parts
      JSON.stringify({ ...qkv, blocks: [2, 2] }), // blocks that do not tile the axis
      JSON.stringify({ ...qkv, blocks: [3, 3] }), // a block the parts do not divide
      JSON.stringify({ ...qkv, axis: 2 }),
      JSON.stringify({ rank: 0, parts: 2 }),
    ];
    for (const text of bad) {
      expect(() => parseSplit(text, "rank-00001.safetensors", "qkv.weight"), text).toThrow(CheckpointError);
      expect(() => parseSplit(text, "rank-00001.safetensors", "qkv.weight"), text).toThrow(/rank-00001\.safetensors: qkv\.weight's tensor-parallel slice is malformed/);
    }
  });
});
