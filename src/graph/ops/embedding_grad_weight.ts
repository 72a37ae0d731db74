// embedding_grad_weight(dy, ids){num}: scatter-adds each row of dy into the table row its id selected.
import { dim, shapeEq } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
import { defineInternalOp } from "./internal-rules.js";
import { PARTS_ATTR } from "./tensor-parallel-rules.js";
import { num, opError } from "./shape-rules.js";

export const embedding_grad_weight: OpDef = defineInternalOp({
  name: "embedding_grad_weight",
  summary: "Weight gradient of embedding: rows of dy [..., dim] summed into a [num, dim] table by i32 ids [...].",
  inputs: ["dy", "ids"],
  attrs: [{ name: "num", type: "int", doc: "Rows of the table (the forward op's num)." }, PARTS_ATTR],
  infer([dy, ids], attrs) {
    if (ids!.dtype !== "i32" || !shapeEq(dy!.shape.slice(0, -1), ids!.shape) || dy!.shape.length !== ids!.shape.length + 1) {
      return opError("FSM402", `embedding_grad_weight: ${typeToString(dy!)} does not match ids ${typeToString(ids!)}`);
    }
    return { dtype: dy!.dtype, shape: [dim(num(attrs, "num")), dy!.shape[dy!.shape.length - 1]!] };
  },
});
