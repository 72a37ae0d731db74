// layer_norm_grad_weight(dy, x){eps}: the scale's gradient Σ dy·x̂ over rows, x̂ = (x − mean)·rstd recomputed from x.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, EPS_ATTR } from "./internal-rules.js";
import { normGradWeight } from "./norm-grad-rules.js";

export const layer_norm_grad_weight: OpDef = defineInternalOp({
  name: "layer_norm_grad_weight",
  summary: "Scale gradient of layer_norm: Σ over rows of dy · x̂, x̂ the normalized input recomputed from x.",
  inputs: ["dy", "x"],
  attrs: [EPS_ATTR],
  infer: ([dy, x]) => normGradWeight("layer_norm_grad_weight", dy!, x!),
});
