// mse_loss(pred, target): mean squared error over all elements, an f32 scalar.
import { shapeEq } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
import { ELEMENTWISE_FLOPS, lossCost } from "./cost-rules.js";
import { defineOp, firstError, opError, requireFloat, requireSameDType } from "./shape-rules.js";

export const mse_loss: OpDef = defineOp({
  name: "mse_loss",
  kind: "function",
  summary: "Mean squared error of two float tensors of the same shape, an f32 scalar.",
  inputs: ["pred", "target"],
  attrs: [],
  infer([pred, target]) {
    const bad = firstError(
      requireFloat("mse_loss", pred!, "pred"),
      requireFloat("mse_loss", target!, "target"),
      requireSameDType("mse_loss", pred!, target!),
    );
    if (bad) return bad;
    if (!shapeEq(pred!.shape, target!.shape)) {
      return opError("FSM402", `mse_loss needs pred and target of the same shape, got ${typeToString(pred!)} and ${typeToString(target!)}`);
    }
    return { dtype: "f32", shape: [] };
  },
  cost: (inputs, _attrs, b) => lossCost(ELEMENTWISE_FLOPS.mse_loss, inputs, b),
  // Symmetric in its operands: the target's gradient is the same rule with the operands swapped.
  backward: ({ inputs: [pred, target], dy, wants }, e) => [
    wants[0] ? e.input("mse_loss_grad", [dy, pred!, target!]) : undefined,
    wants[1] ? e.input("mse_loss_grad", [dy, target!, pred!]) : undefined,
  ],
});
