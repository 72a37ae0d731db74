// linear_grad_input(dy, weight): dx = dy·W, the input gradient of linear (W is [out, in]).
import { dimEq } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
import { defineInternalOp } from "./internal-rules.js";
import { opError } from "./shape-rules.js";

export const linear_grad_input: OpDef = defineInternalOp({
  name: "linear_grad_input",
  summary: "Input gradient of linear: dy [..., out] · weight [out, in] → [..., in].",
  inputs: ["dy", "weight"],
  attrs: [],
  infer([dy, w]) {
    const last = dy!.shape[dy!.shape.length - 1];
    if (w!.shape.length !== 2 || last === undefined || !dimEq(last, w!.shape[0]!)) {
      return opError("FSM402", `linear_grad_input: ${typeToString(dy!)} does not match weight ${typeToString(w!)}`);
    }
    return { dtype: dy!.dtype, shape: [...dy!.shape.slice(0, -1), w!.shape[1]!] };
  },
});
