// gelu(x): GELU activation x·Φ(x), elementwise.
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { activationOp } from "./shape-rules.js";

export const gelu: OpDef = {
  ...activationOp("gelu", "GELU activation x·Φ(x), elementwise."),
  cost: elementwiseCost(ELEMENTWISE_FLOPS.gelu),
  backward: ({ inputs: [x], dy }, e) => [e.input("gelu_grad", [dy, x!])],
};
