// mul(a, b): elementwise a * b with NumPy broadcasting (the checker lowers the `*` operator on tensors to it).
import { reduceTo } from "../backward-rule.js";
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { binaryOp } from "./shape-rules.js";

export const mul: OpDef = {
  ...binaryOp("mul", "Elementwise a * b with broadcasting; operands share a dtype."),
  cost: elementwiseCost(ELEMENTWISE_FLOPS.mul),
  // d(a·b) = dy·b for a and dy·a for b, each summed over the dims it was broadcast along.
  backward: ({ inputs: [a, b], dy, wants }, e) => [
    wants[0] ? reduceTo(e, e.input("mul", [dy, b!]), e.type(a!).shape) : undefined,
    wants[1] ? reduceTo(e, e.input("mul", [dy, a!]), e.type(b!).shape) : undefined,
  ],
};
