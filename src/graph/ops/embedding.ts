// embedding(num, dim): table lookup, i32 ids [...] → f32 vectors [..., dim].
import { dim } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { defineOp, num, requireDType, requirePositive } from "./shape-rules.js";

export const embedding: OpDef = defineOp({
  name: "embedding",
  kind: "module",
  summary: "Looks up rows of a [num, dim] table by i32 index: [...] → [..., dim].",
  inputs: ["ids"],
  attrs: [
    { name: "num", type: "int", doc: "Number of rows (vocabulary or context size)." },
    { name: "dim", type: "int", doc: "Width of each row (the embedding size)." },
  ],
  validate: (attrs) => requirePositive("embedding", attrs, ["num", "dim"]),
  params: (attrs) => [{ name: "weight", shape: [dim(num(attrs, "num")), dim(num(attrs, "dim"))], init: "normal" }],
  infer([ids], attrs) {
    const bad = requireDType("embedding", ids!, "i32", "indices");
    if (bad) return bad;
    return { dtype: "f32", shape: [...ids!.shape, dim(num(attrs, "dim"))] };
  },
});
