// fill(){value, shape}: a constant f32 tensor; the loss seed d(loss)/d(loss) = 1 of every training graph.
import type { OpDef } from "../op-def.js";
import { defineInternalOp } from "./internal-rules.js";
import { num, shapeAttr } from "./shape-rules.js";

export const fill: OpDef = defineInternalOp({
  name: "fill",
  summary: "A constant f32 tensor of the given shape (the loss gradient seed is fill {value: 1}).",
  inputs: [],
  attrs: [
    { name: "value", type: "float", doc: "The value of every element." },
    { name: "shape", type: "shape", default: [], doc: "The shape; a scalar by default." },
  ],
  infer(_inputs, attrs) {
    num(attrs, "value"); // asserts the value is present: a fill without one is a compiler bug
    return { dtype: "f32", shape: shapeAttr(attrs, "shape") };
  },
});
