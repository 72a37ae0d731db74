// tp_copy(x): Megatron's "f" — enters a tensor-parallel region: the identity forward (every rank of the
// group already holds x whole), and an all-reduce of the gradient backward (each rank's part of the region
// contributes a partial gradient of x).
import type { OpDef } from "../op-def.js";
import { collectiveCost, defineTensorParallelOp, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";

export const tp_copy: OpDef = defineTensorParallelOp({
  name: "tp_copy",
  summary: "Enters a tensor-parallel region: identity forward, all-reduce of the gradient over the group backward.",
  inputs: ["x"],
  attrs: [PARTS_ATTR],
  infer: ([x]) => x!,
  cost: collectiveCost(() => undefined, ([x]) => [{ phase: "backward", kind: "all_reduce", type: x! }]),
  // Of a parameter (a replicated weight read on each rank's part of the sequence), the all-reduced gradient
  // is the parameter's: a weight gradient.
  backward: ({ inputs: [x], dy, attrs }, e) => [e.isParam(x!) ? e.weight("tp_all_reduce", [dy], { parts: partsOf(attrs) }) : e.input("tp_all_reduce", [dy], { parts: partsOf(attrs) })],
});
