// embedding(num, dim): table lookup, i32 ids [...] → f32 vectors [..., dim].
import { dim } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { DTYPE_BYTES } from "../types.js";
import { bytesOf, elems } from "./cost-rules.js";
import { PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";
import { defineOp, num, requireDType, requirePositive } from "./shape-rules.js";

export const embedding: OpDef = defineOp({
  name: "embedding",
  kind: "module",
  summary: "Looks up rows of a [num, dim] table by i32 index: [...] → [..., dim].",
  inputs: ["ids"],
  attrs: [
    { name: "num", type: "int", doc: "Number of rows (vocabulary or context size)." },
    { name: "dim", type: "int", doc: "Width of each row (the embedding size)." },
    // Vocabulary-parallel (Megatron): with parts = p, `num` is the rows one rank holds (rank k: rows
    // [k·num, (k+1)·num) of the whole table); ids are checked against num·p, other ranks' ids look up zeros
    // and the pass sums the ranks' outputs with an all-reduce.
    PARTS_ATTR,
  ],
  validate: (attrs) => requirePositive("embedding", attrs, ["num", "dim"]),
  params: (attrs) => [{ name: "weight", shape: [dim(num(attrs, "num")), dim(num(attrs, "dim"))], init: "normal" }],
  infer([ids], attrs) {
    const bad = requireDType("embedding", ids!, "i32", "indices");
    if (bad) return bad;
    return { dtype: "f32", shape: [...ids!.shape, dim(num(attrs, "dim"))] };
  },
  // A gather: no arithmetic forward, only the looked-up rows are read. Backward scatter-adds dY into the
  // table's gradient (one add per output element, a weight gradient); integer ids get no gradient.
  cost([ids, weight], attrs, b) {
    const n = elems(ids!, b) * num(attrs, "dim");
    const row = DTYPE_BYTES[weight!.dtype];
    return {
      forwardFlops: 0,
      backwardFlops: { input: 0, weight: n },
      bytesRead: bytesOf(ids!, b) + n * row,
      bytesWritten: n * row,
      unit: "vector",
    };
  },
  // Integer ids have no gradient; the table's is a scatter-add of dy.
  backward: ({ inputs: [ids], dy, attrs, wants }, e) => [
    undefined,
    wants[1] ? e.weight("embedding_grad_weight", [dy, ids!], { num: num(attrs, "num"), ...(partsOf(attrs) > 1 && { parts: partsOf(attrs) }) }) : undefined,
  ],
});
