// add(a, b): elementwise a + b with NumPy broadcasting (the checker lowers the `+` operator on tensors to it).
import { reduceTo } from "../backward-rule.js";
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { binaryOp } from "./shape-rules.js";

export const add: OpDef = {
  ...binaryOp("add", "Elementwise a + b with broadcasting; operands share a dtype."),
  cost: elementwiseCost(ELEMENTWISE_FLOPS.add),
  // The gradient passes through to both operands, summed over the dims each was broadcast along; a
  // parameter's sum (a row-parallel layer's bias, added after the tensor-parallel all-reduce) is a weight
  // gradient, so the shard plans hang its collectives where they hang every other's.
  backward: ({ inputs: [a, b], dy, wants }, e) => [
    wants[0] ? reduceTo(e, dy, e.type(a!).shape, e.isParam(a!) ? "weight" : "input") : undefined,
    wants[1] ? reduceTo(e, dy, e.type(b!).shape, e.isParam(b!) ? "weight" : "input") : undefined,
  ],
};
