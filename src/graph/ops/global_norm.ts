// global_norm(s_0, ..., s_{n-1}){n}: √(Σ s_i), the L2 norm of all gradients from their sums of squares.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireScalar } from "./internal-rules.js";
import { firstError, num, requirePositive } from "./shape-rules.js";

export const global_norm: OpDef = defineInternalOp({
  name: "global_norm",
  summary: "Square root of the sum of n scalar sums of squares: the global L2 norm of the gradients.",
  inputs: ["sumsq"],
  inputsFor: (attrs) => Array.from({ length: num(attrs, "n") }, (_, i) => `sumsq${i}`),
  attrs: [{ name: "n", type: "int", doc: "Number of operands (one sum of squares per gradient)." }],
  validate: (attrs) => requirePositive("global_norm", attrs, ["n"]),
  infer: (inputs) => firstError(...inputs.map((t, i) => requireScalar("global_norm", t, `operand ${i}`))) ?? { dtype: "f32", shape: [] },
});
