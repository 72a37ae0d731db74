// div_grad_b(dy, a, b): the divisor's gradient of a / b before un-broadcasting, −dy·a / b².
import { shapeEq } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { defineInternalOp } from "./internal-rules.js";
import { broadcastShapes, opError } from "./shape-rules.js";

export const div_grad_b: OpDef = defineInternalOp({
  name: "div_grad_b",
  summary: "Gradient of a / b with respect to b at the broadcast shape: −dy · a / b² (sum_to reduces it).",
  inputs: ["dy", "a", "b"],
  attrs: [],
  infer([dy, a, b]) {
    const s = broadcastShapes(a!.shape, b!.shape);
    if (!s || !shapeEq(s, dy!.shape)) return opError("FSM402", "div_grad_b: dy must have the broadcast shape of a and b");
    return dy!;
  },
});
