// tp_all_gather(x): joins the last-dimension slices the ranks of a tensor-parallel group hold into the whole
// tensor on every rank (where a split value meets an op that needs all of it); backward each rank keeps its
// own slice of the (whole, replicated) gradient.
import type { OpDef } from "../op-def.js";
import { collectiveCost, defineTensorParallelOp, lastDimWhole, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";

export const tp_all_gather: OpDef = defineTensorParallelOp({
  name: "tp_all_gather",
  summary: "Gathers the ranks' last-dimension slices into the whole tensor; backward keeps this rank's slice.",
  inputs: ["x"],
  attrs: [PARTS_ATTR],
  infer: ([x], attrs) => lastDimWhole(x!, partsOf(attrs)),
  cost: collectiveCost(() => undefined, ([x], attrs) => [{ phase: "forward", kind: "all_gather", type: lastDimWhole(x!, partsOf(attrs)) }]),
  backward: ({ dy, attrs }, e) => [e.input("tp_slice", [dy], { parts: partsOf(attrs) })],
});
