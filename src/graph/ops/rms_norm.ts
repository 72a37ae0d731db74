// rms_norm(d, eps): scales the last dimension by its reciprocal root-mean-square (Llama's norm), no shift.
import { dim } from "../dim.js";
import type { OpDef } from "../op-def.js";
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
});
