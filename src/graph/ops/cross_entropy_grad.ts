// cross_entropy_grad(dloss, logits, targets): (softmax(logits) − onehot(targets)) · dloss / rows.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireScalar } from "./internal-rules.js";
import { PARTS_ATTR } from "./tensor-parallel-rules.js";
import { firstError, requireDType } from "./shape-rules.js";

export const cross_entropy_grad: OpDef = defineInternalOp({
  name: "cross_entropy_grad",
  summary: "Logits gradient of the mean cross-entropy: (softmax − onehot(targets)) · dloss / rows.",
  inputs: ["dloss", "logits", "targets"],
  // The forward's vocabulary split: this rank's slice of the softmax, from the same all-reduced row stats.
  attrs: [PARTS_ATTR],
  infer: ([dloss, logits, targets]) =>
    firstError(requireScalar("cross_entropy_grad", dloss!, "dloss"), requireDType("cross_entropy_grad", targets!, "i32", "targets")) ?? logits!,
});
