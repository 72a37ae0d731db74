// sum_to(x){shape}: sums x down to a shape it was broadcast from (the gradient of broadcasting; bias grads).
import { shapeEq, shapeToString } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
import { defineInternalOp } from "./internal-rules.js";
import { broadcastShapes, opError, shapeAttr } from "./shape-rules.js";

export const sum_to: OpDef = defineInternalOp({
  name: "sum_to",
  summary: "Sums a tensor over the dims along which `shape` was broadcast to it, giving a tensor of `shape`.",
  inputs: ["x"],
  attrs: [{ name: "shape", type: "shape", doc: "The target shape; it must broadcast to x's shape." }],
  infer([x], attrs) {
    const shape = shapeAttr(attrs, "shape");
    const b = broadcastShapes(shape, x!.shape);
    if (!b || !shapeEq(b, x!.shape)) return opError("FSM402", `sum_to: ${shapeToString(shape)} does not broadcast to ${typeToString(x!)}`);
    return { dtype: x!.dtype, shape };
  },
});
