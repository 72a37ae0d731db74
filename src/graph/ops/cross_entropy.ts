// cross_entropy(logits, targets): mean negative log-likelihood of i32 class targets under softmax(logits).
import { shapeEq, shapeToString } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { DTYPE_BYTES } from "../types.js";
import { typeToString } from "../types-format.js";
import { ELEMENTWISE_FLOPS, elems, lossCost } from "./cost-rules.js";
import { PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";
import { defineOp, firstError, opError, requireDType, requireFloat, requireMinRank } from "./shape-rules.js";

export const cross_entropy: OpDef = defineOp({
  name: "cross_entropy",
  kind: "function",
  summary: "Softmax cross-entropy of logits [..., V] against i32 targets [...], averaged to an f32 scalar.",
  inputs: ["logits", "targets"],
  // Vocabulary-parallel (Megatron): with parts = p each rank holds a 1/p slice of the logits' last dimension
  // (rank k: classes [k·V/p, (k+1)·V/p)); the row maxima, the sums of exponentials and the target logits are
  // all-reduced over the group, so every rank gets the whole loss without gathering the logits.
  attrs: [PARTS_ATTR],
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
  cost(inputs, attrs, b) {
    const rowStats = elems(inputs[1]!, b) * DTYPE_BYTES.f32;
    const cost = lossCost(ELEMENTWISE_FLOPS.cross_entropy, inputs, b, rowStats);
    const parts = partsOf(attrs);
    if (parts === 1) return cost;
    // Three all-reduces of one f32 per row: the maxima, then the target logits and the sums of exponentials.
    return { ...cost, collectives: { groupSize: parts, list: [1, 2, 3].map(() => ({ phase: "forward" as const, kind: "all_reduce" as const, bytes: rowStats })) } };
  },
  backward: ({ inputs: [logits, targets], dy, attrs }, e) => [
    e.input("cross_entropy_grad", [dy, logits!, targets!], partsOf(attrs) > 1 ? { parts: partsOf(attrs) } : {}),
    undefined,
  ],
});
