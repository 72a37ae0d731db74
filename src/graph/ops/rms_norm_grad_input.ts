// rms_norm_grad_input(dy, x, weight){eps}: the input gradient of rms_norm, recomputing its statistics from x.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, EPS_ATTR } from "./internal-rules.js";
import { normGradInput } from "./norm-grad-rules.js";

export const rms_norm_grad_input: OpDef = defineInternalOp({
  name: "rms_norm_grad_input",
  summary: "Input gradient of rms_norm: dx from dy, the forward input x and the scale (statistics recomputed).",
  inputs: ["dy", "x", "weight"],
  attrs: [EPS_ATTR],
  infer: ([dy, x, w]) => normGradInput("rms_norm_grad_input", dy!, x!, w!),
});
