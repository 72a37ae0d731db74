// rms_norm_grad_weight(dy, x){eps}: the scale's gradient Σ dy·x̂ over rows, x̂ = x/rms recomputed from x.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, EPS_ATTR } from "./internal-rules.js";
import { normGradWeight } from "./norm-grad-rules.js";

export const rms_norm_grad_weight: OpDef = defineInternalOp({
  name: "rms_norm_grad_weight",
  summary: "Scale gradient of rms_norm: Σ over rows of dy · x̂, x̂ the normalized input recomputed from x.",
  inputs: ["dy", "x"],
  attrs: [EPS_ATTR],
  infer: ([dy, x]) => normGradWeight("rms_norm_grad_weight", dy!, x!),
});
