// tp_slice(x): this rank's part of a replicated tensor along its last dimension (rank k of the tensor-
// parallel group keeps columns [k·n/parts, (k+1)·n/parts)); backward the slices' gradients are gathered.
import type { OpDef } from "../op-def.js";
import { collectiveCost, defineTensorParallelOp, lastDimSlice, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";
import { isOpCheckError } from "../op-def.js";

export const tp_slice: OpDef = defineTensorParallelOp({
  name: "tp_slice",
  summary: "Keeps this rank's last-dimension slice of a replicated tensor; backward gathers the slices' gradients.",
  inputs: ["x"],
  attrs: [PARTS_ATTR],
  infer: ([x], attrs) => lastDimSlice("tp_slice", x!, partsOf(attrs)),
  cost: collectiveCost(
    ([x], attrs) => {
      const out = lastDimSlice("tp_slice", x!, partsOf(attrs));
      return isOpCheckError(out) ? undefined : out;
    },
    ([x]) => [{ phase: "backward", kind: "all_gather", type: x! }],
  ),
  backward: ({ dy, attrs }, e) => [e.input("tp_all_gather", [dy], { parts: partsOf(attrs) })],
});
