// sum_squares(g): Σ g², one per gradient; the first step of clipping gradients by their global norm.
import type { OpDef } from "../op-def.js";
import { defineInternalOp } from "./internal-rules.js";
import { requireFloat } from "./shape-rules.js";

export const sum_squares: OpDef = defineInternalOp({
  name: "sum_squares",
  summary: "Sum of squares of a float tensor, an f32 scalar (one per gradient when clipping).",
  inputs: ["x"],
  attrs: [],
  infer: ([x]) => requireFloat("sum_squares", x!) ?? { dtype: "f32", shape: [] },
});
