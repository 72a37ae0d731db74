// linear_grad_weight(dy, x): dW = dyᵀ·x summed over every leading (row) dimension, the weight gradient of linear.
import { shapeEq } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
import { defineInternalOp } from "./internal-rules.js";
import { opError } from "./shape-rules.js";

export const linear_grad_weight: OpDef = defineInternalOp({
  name: "linear_grad_weight",
  summary: "Weight gradient of linear: dyᵀ [out, rows] · x [rows, in] → [out, in], rows = all leading dims.",
  inputs: ["dy", "x"],
  attrs: [],
  infer([dy, x]) {
    if (dy!.shape.length < 1 || !shapeEq(dy!.shape.slice(0, -1), x!.shape.slice(0, -1)) || x!.shape.length !== dy!.shape.length) {
      return opError("FSM402", `linear_grad_weight: leading dims of ${typeToString(dy!)} and ${typeToString(x!)} differ`);
    }
    return { dtype: dy!.dtype, shape: [dy!.shape[dy!.shape.length - 1]!, x!.shape[x!.shape.length - 1]!] };
  },
});
