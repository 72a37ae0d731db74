// positions(n): the i32 index vector 0..n-1, used to look up position embeddings (`wpe(positions(S))`).
import { dimToString, evalDim } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { DTYPE_BYTES } from "../types.js";
import { dataMovementCost } from "./cost-rules.js";
import { defineOp, dimAttr, opError } from "./shape-rules.js";

export const positions: OpDef = defineOp({
  name: "positions",
  kind: "function",
  summary: "The positions 0..n-1 as an i32 vector of length n.",
  inputs: [],
  attrs: [{ name: "n", type: "dim", doc: "Length, usually the sequence dimension S." }],
  validate(attrs) {
    const n = dimAttr(attrs, "n");
    return Number.isInteger(n.coef) && n.coef >= 1 ? undefined : opError("FSM409", `positions: 'n' must be positive, got ${dimToString(n)}`);
  },
  infer: (_inputs, attrs) => ({ dtype: "i32", shape: [dimAttr(attrs, "n")] }),
  cost: (_inputs, attrs, b) => dataMovementCost(0, evalDim(dimAttr(attrs, "n"), b) * DTYPE_BYTES.i32),
});
