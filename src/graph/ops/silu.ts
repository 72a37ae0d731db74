// silu(x): SiLU (swish) activation x·sigmoid(x), elementwise.
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { activationOp } from "./shape-rules.js";

export const silu: OpDef = {
  ...activationOp("silu", "SiLU (swish) activation x·sigmoid(x), elementwise."),
  cost: elementwiseCost(ELEMENTWISE_FLOPS.silu),
  backward: ({ inputs: [x], dy }, e) => [e.input("silu_grad", [dy, x!])],
};
