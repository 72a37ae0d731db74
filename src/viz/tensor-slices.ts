// How viz words a tensor-parallel parameter split (plan.graph.params[].split, graph/param-split.ts): along
// its split axis a rank holds, in every block (q, k and v of a fused qkv weight), the rank-th of `parts`
// equal parts, so its slice is one range of indices per block of the whole axis.
import type { PlanParam } from "../plan/plan.js";

type Split = NonNullable<PlanParam["split"]>;

/** The split axis of a parameter of `dims` dimensions: rows and columns of a matrix, elements of a vector. */
function axisName(axis: number, dims: number): string {
  if (dims === 1) return "elements";
  if (dims === 2) return axis === 0 ? "rows" : "columns";
  return `indices of dimension ${axis}`;
}

/** `rows split 2 ways`, `rows of each of 3 blocks split 2 ways`. */
export function splitText(split: Split, dims: number): string {
  const blocks = split.blocks.length > 1 ? ` of each of ${split.blocks.length} blocks` : "";
  return `${axisName(split.axis, dims)}${blocks} split ${split.parts} ways`;
}

/** `rows 0..31 of 64`, `rows 16..31, 48..63, 80..95 of 96`: what tensor rank `rank` holds of the whole axis. */
export function sliceText(split: Split, dims: number, rank: number): string {
  let whole = 0;
  const ranges = split.blocks.map((block) => {
    const part = block / split.parts;
    const first = whole + rank * part;
    whole += block;
    return `${first}..${first + part - 1}`;
  });
  return `${axisName(split.axis, dims)} ${ranges.join(", ")} of ${whole}`;
}
