// tp_all_reduce(x): Megatron's "g" — leaves a tensor-parallel region: each rank holds a partial sum (a row-
// parallel product, a vocabulary-parallel lookup), the all-reduce makes it whole on every rank; backward the
// gradient of a replicated value is already whole on every rank and passes through.
import type { OpDef } from "../op-def.js";
import { collectiveCost, defineTensorParallelOp, PARTS_ATTR } from "./tensor-parallel-rules.js";

export const tp_all_reduce: OpDef = defineTensorParallelOp({
  name: "tp_all_reduce",
  summary: "Sums a partial value over the tensor-parallel group (forward); the gradient passes through.",
  inputs: ["x"],
  attrs: [PARTS_ATTR],
  infer: ([x]) => x!,
  cost: collectiveCost(() => undefined, ([x]) => [{ phase: "forward", kind: "all_reduce", type: x! }]),
  backward: ({ dy }) => [dy],
});
