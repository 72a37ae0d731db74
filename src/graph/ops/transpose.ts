// transpose(x, dim0, dim1): swaps two dimensions (negative indices count from the end).
import type { OpDef } from "../op-def.js";
import { bytesOf, dataMovementCost } from "./cost-rules.js";
import { axisError, defineOp, normalizeAxis, num } from "./shape-rules.js";

export const transpose: OpDef = defineOp({
  name: "transpose",
  kind: "function",
  summary: "Swaps two dimensions of a tensor.",
  inputs: ["x"],
  attrs: [
    { name: "dim0", type: "int", doc: "First dimension to swap; negative counts from the end." },
    { name: "dim1", type: "int", doc: "Second dimension to swap; negative counts from the end." },
  ],
  infer([x], attrs) {
    const rank = x!.shape.length;
    const [d0, d1] = [num(attrs, "dim0"), num(attrs, "dim1")];
    const a = normalizeAxis(d0, rank);
    if (a === undefined) return axisError("transpose", "dim0", d0, x!);
    const b = normalizeAxis(d1, rank);
    if (b === undefined) return axisError("transpose", "dim1", d1, x!);
    const shape = [...x!.shape];
    [shape[a], shape[b]] = [shape[b]!, shape[a]!];
    return { dtype: x!.dtype, shape };
  },
  // Counted as materialized (the matmul after it wants contiguous operands): one read and one write.
  cost: ([x], _attrs, b) => dataMovementCost(bytesOf(x!, b), bytesOf(x!, b)),
  backward: ({ dy, attrs }, e) => [e.input("transpose", [dy], { dim0: num(attrs, "dim0"), dim1: num(attrs, "dim1") })],
});
