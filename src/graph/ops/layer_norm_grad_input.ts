// layer_norm_grad_input(dy, x, weight){eps}: the input gradient of layer_norm, recomputing its statistics from x.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, EPS_ATTR } from "./internal-rules.js";
import { normGradInput } from "./norm-grad-rules.js";

export const layer_norm_grad_input: OpDef = defineInternalOp({
  name: "layer_norm_grad_input",
  summary: "Input gradient of layer_norm: dx from dy, the forward input x and the scale (statistics recomputed).",
  inputs: ["dy", "x", "weight"],
  attrs: [EPS_ATTR],
  infer: ([dy, x, w]) => normGradInput("layer_norm_grad_input", dy!, x!, w!),
});
