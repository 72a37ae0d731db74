// cross_entropy(logits, targets): mean negative log-likelihood of i32 class targets under softmax(logits).
import { shapeEq, shapeToString } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { DTYPE_BYTES } from "../types.js";
import { typeToString } from "../types-format.js";
import { ELEMENTWISE_FLOPS, elems, lossCost } from "./cost-rules.js";
import { defineOp, firstError, opError, requireDType, requireFloat, requireMinRank } from "./shape-rules.js";

export const cross_entropy: OpDef = defineOp({
  name: "cross_entropy",
  kind: "function",
  summary: "Softmax cross-entropy of logits [..., V] against i32 targets [...], averaged to an f32 scalar.",
  inputs: ["logits", "targets"],
  attrs: [],
  infer([logits, targets]) {
    const bad = firstError(
      requireMinRank("cross_entropy", logits!, 1, "logits"),
      requireFloat("cross_entropy", logits!, "logits"),
      requireDType("cross_entropy", targets!, "i32", "targets"),
    );
    if (bad) return bad;
    const want = logits!.shape.slice(0, -1);
    if (!shapeEq(targets!.shape, want)) {
      return opError(
        "FSM402",
        `cross_entropy expects targets of shape ${shapeToString(want)} for logits ${typeToString(logits!)}, got ${typeToString(targets!)}`,
      );
    }
    return { dtype: "f32", shape: [] };
  },
  // The per-row log-sum-exp is written too: backward needs it to rebuild the softmax.
  cost: (inputs, _attrs, b) => lossCost(ELEMENTWISE_FLOPS.cross_entropy, inputs, b, elems(inputs[1]!, b) * DTYPE_BYTES.f32),
  backward: ({ inputs: [logits, targets], dy }, e) => [e.input("cross_entropy_grad", [dy, logits!, targets!]), undefined],
});
