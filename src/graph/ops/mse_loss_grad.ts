// mse_loss_grad(dloss, a, b): 2·(a − b)·dloss / numel, the gradient of mean((a − b)²) with respect to a.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireSameShape, requireScalar } from "./internal-rules.js";
import { firstError } from "./shape-rules.js";

export const mse_loss_grad: OpDef = defineInternalOp({
  name: "mse_loss_grad",
  summary: "Gradient of mean((a − b)²) with respect to a: 2·(a − b)·dloss / numel (swap a and b for b's).",
  inputs: ["dloss", "a", "b"],
  attrs: [],
  infer: ([dloss, a, b]) => firstError(requireScalar("mse_loss_grad", dloss!, "dloss"), requireSameShape("mse_loss_grad", a!, b!)) ?? a!,
});
