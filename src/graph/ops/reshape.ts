// reshape(x, shape): same elements, new shape; counts are compared as monomials so [B, S, d] → [B*S, d] checks.
import { dimEq, dimToString, numelDim, shapeToString } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
import { dataMovementCost } from "./cost-rules.js";
import { defineOp, opError, shapeAttr } from "./shape-rules.js";

export const reshape: OpDef = defineOp({
  name: "reshape",
  kind: "function",
  summary: "Reinterprets a tensor with a new shape of the same element count.",
  inputs: ["x"],
  attrs: [{ name: "shape", type: "shape", doc: "The new shape, e.g. [B * S, d]; may use B and S." }],
  validate(attrs) {
    const bad = shapeAttr(attrs, "shape").find((d) => !(Number.isInteger(d.coef) && d.coef >= 1));
    return bad ? opError("FSM409", `reshape: dimensions must be positive integers, got ${dimToString(bad)}`) : undefined;
  },
  infer([x], attrs) {
    const shape = shapeAttr(attrs, "shape");
    const [from, to] = [numelDim(x!.shape), numelDim(shape)];
    if (!dimEq(from, to)) {
      return opError(
        "FSM402",
        `reshape cannot turn ${typeToString(x!)} (${dimToString(from)} elements) into ${shapeToString(shape)} (${dimToString(to)} elements)`,
      );
    }
    return { dtype: x!.dtype, shape };
  },
  // A reshape of a contiguous tensor is a view: no data moves, forward or backward.
  cost: () => dataMovementCost(0, 0),
  backward: ({ inputs: [x], dy }, e) => [e.input("reshape", [dy], { shape: e.type(x!).shape })],
});
