// relu(x): ReLU activation max(x, 0), elementwise.
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { activationOp } from "./shape-rules.js";

export const relu: OpDef = {
  ...activationOp("relu", "ReLU activation max(x, 0), elementwise."),
  cost: elementwiseCost(ELEMENTWISE_FLOPS.relu),
  // Reads the output, not the input: y > 0 exactly where x > 0, and y is what PyTorch keeps too.
  backward: ({ output, dy }, e) => [e.input("relu_grad", [dy, output])],
};
