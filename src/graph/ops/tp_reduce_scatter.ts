// tp_reduce_scatter(x): Megatron's "ḡ" under sequence parallelism — leaves a tensor-parallel region into the
// sequence-parallel one: each rank's partial sum (a row-parallel product, a vocabulary-parallel lookup)
// summed over the group and each rank keeping its part of the sequence; backward the sequence parts'
// gradients are all-gathered (the region reads the whole sequence on every rank). It replaces tp_all_reduce
// there, moving half its bytes.
import type { OpDef } from "../op-def.js";
import { AXIS_ATTR, axisOf, axisSlice, collectiveCost, defineTensorParallelOp, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";

export const tp_reduce_scatter: OpDef = defineTensorParallelOp({
  name: "tp_reduce_scatter",
  summary: "Sums partial values over the group, each rank keeping its sequence part (leaving a tensor-parallel region); backward all-gathers the gradient.",
  inputs: ["x"],
  attrs: [PARTS_ATTR, AXIS_ATTR],
  infer: ([x], attrs) => axisSlice("tp_reduce_scatter", x!, partsOf(attrs), axisOf(attrs, x!.shape.length)),
  cost: collectiveCost(
    () => undefined,
    ([x]) => [
      { phase: "forward", kind: "reduce_scatter", type: x! },
      { phase: "backward", kind: "all_gather", type: x! },
    ],
  ),
  backward: ({ dy, attrs }, e) => [e.input("tp_all_gather", [dy], { ...attrs })],
});
