// rms_norm(d, eps): scales the last dimension by its reciprocal root-mean-square (Llama's norm), no shift.
import { dim } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, normCost } from "./cost-rules.js";
import { defineOp, firstError, num, opError, requireFloat, requireLastDim, requirePositive } from "./shape-rules.js";

export const rms_norm: OpDef = defineOp({
  name: "rms_norm",
  kind: "module",
  summary: "RMS normalization over the last dimension (size d) with a learned scale.",
  inputs: ["x"],
  attrs: [
    { name: "d", type: "int", doc: "Size of the normalized (last) dimension." },
    { name: "eps", type: "float", default: 1e-6, doc: "Added to the mean square for numerical stability." },
  ],
  validate(attrs) {
    return firstError(
      requirePositive("rms_norm", attrs, ["d"]),
      num(attrs, "eps") > 0 ? undefined : opError("FSM409", `rms_norm: 'eps' must be positive, got ${num(attrs, "eps")}`),
    );
  },
  params: (attrs) => [{ name: "weight", shape: [dim(num(attrs, "d"))], init: "ones" }],
  infer([x], attrs) {
    return firstError(requireFloat("rms_norm", x!), requireLastDim("rms_norm", x!, num(attrs, "d"))) ?? x!;
  },
  cost: normCost(ELEMENTWISE_FLOPS.rms_norm),
  // The row scale is recomputed from x in both gradient ops rather than saved (one float per row).
  backward: ({ inputs: [x, w], dy, attrs, wants }, e) => [
    wants[0] ? e.input("rms_norm_grad_input", [dy, x!, w!], { eps: num(attrs, "eps") }) : undefined,
    wants[1] ? e.weight("rms_norm_grad_weight", [dy, x!], { eps: num(attrs, "eps") }) : undefined,
  ],
});
