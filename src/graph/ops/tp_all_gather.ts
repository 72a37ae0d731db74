// tp_all_gather(x): joins the parts the ranks of a tensor-parallel group hold along an axis (the last, or the
// sequence's) into the whole tensor on every rank (where a split value meets an op that computes the same
// whole value on every rank); backward each rank keeps its own part of the (whole, replicated) gradient.
import type { OpDef } from "../op-def.js";
import { AXIS_ATTR, axisOf, axisWhole, collectiveCost, defineTensorParallelOp, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";

export const tp_all_gather: OpDef = defineTensorParallelOp({
  name: "tp_all_gather",
  summary: "Gathers the ranks' parts along an axis into the whole tensor; backward keeps this rank's part.",
  inputs: ["x"],
  attrs: [PARTS_ATTR, AXIS_ATTR],
  infer: ([x], attrs) => axisWhole(x!, partsOf(attrs), axisOf(attrs, x!.shape.length)),
  cost: collectiveCost(() => undefined, ([x], attrs) => [{ phase: "forward", kind: "all_gather", type: axisWhole(x!, partsOf(attrs), axisOf(attrs, x!.shape.length)) }]),
  backward: ({ dy, attrs }, e) => [e.input("tp_slice", [dy], { ...attrs })],
});
