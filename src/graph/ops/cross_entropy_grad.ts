// cross_entropy_grad(dloss, logits, targets): (softmax(logits) − onehot(targets)) · dloss / rows.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireScalar } from "./internal-rules.js";
import { firstError, requireDType } from "./shape-rules.js";

export const cross_entropy_grad: OpDef = defineInternalOp({
  name: "cross_entropy_grad",
  summary: "Logits gradient of the mean cross-entropy: (softmax − onehot(targets)) · dloss / rows.",
  inputs: ["dloss", "logits", "targets"],
  attrs: [],
  infer: ([dloss, logits, targets]) =>
    firstError(requireScalar("cross_entropy_grad", dloss!, "dloss"), requireDType("cross_entropy_grad", targets!, "i32", "targets")) ?? logits!,
});
