// tp_slice(x): this rank's part of a replicated tensor along an axis (the last, or the sequence's under
// sequence parallelism: rank k keeps [k·n/parts, (k+1)·n/parts)); backward the parts' gradients are gathered.
import type { OpDef } from "../op-def.js";
import { isOpCheckError } from "../op-def.js";
import { AXIS_ATTR, axisOf, axisSlice, collectiveCost, defineTensorParallelOp, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";

export const tp_slice: OpDef = defineTensorParallelOp({
  name: "tp_slice",
  summary: "Keeps this rank's part of a replicated tensor along an axis; backward gathers the parts' gradients.",
  inputs: ["x"],
  attrs: [PARTS_ATTR, AXIS_ATTR],
  infer: ([x], attrs) => axisSlice("tp_slice", x!, partsOf(attrs), axisOf(attrs, x!.shape.length)),
  cost: collectiveCost(
    ([x], attrs) => {
      const out = axisSlice("tp_slice", x!, partsOf(attrs), axisOf(attrs, x!.shape.length));
      return isOpCheckError(out) ? undefined : out;
    },
    ([x]) => [{ phase: "backward", kind: "all_gather", type: x! }],
  ),
  backward: ({ dy, attrs }, e) => [e.input("tp_all_gather", [dy], { ...attrs })],
});
