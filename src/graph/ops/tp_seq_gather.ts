// tp_seq_gather(x): Megatron's "g" under sequence parallelism — enters a tensor-parallel region from the
// sequence-parallel one: the ranks' sequence parts all-gathered into the whole sequence forward; backward the
// region's partial gradients (each rank's heads or columns contribute one) reduce-scattered back into the
// ranks' sequence parts. It replaces tp_copy where the input is sequence-split. Its output is not kept for
// the backward: autodiff gathers it again there (src/passes/autodiff.ts regathering).
import type { OpDef } from "../op-def.js";
import { AXIS_ATTR, axisOf, axisWhole, collectiveCost, defineTensorParallelOp, PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";

export const tp_seq_gather: OpDef = defineTensorParallelOp({
  name: "tp_seq_gather",
  summary: "All-gathers the ranks' sequence parts into the whole (entering a tensor-parallel region); backward reduce-scatters the gradient.",
  inputs: ["x"],
  attrs: [PARTS_ATTR, AXIS_ATTR],
  infer: ([x], attrs) => axisWhole(x!, partsOf(attrs), axisOf(attrs, x!.shape.length)),
  cost: collectiveCost(() => undefined, ([x], attrs) => {
    const whole = axisWhole(x!, partsOf(attrs), axisOf(attrs, x!.shape.length));
    // Backward: the whole sequence gathered again (autodiff does not keep it from the forward), then the
    // gradient reduce-scattered.
    return [
      { phase: "forward", kind: "all_gather", type: whole },
      { phase: "backward", kind: "all_gather", type: whole },
      { phase: "backward", kind: "reduce_scatter", type: whole },
    ];
  }),
  backward: ({ dy, attrs }, e) => [e.input("tp_reduce_scatter", [dy], { ...attrs })],
});
