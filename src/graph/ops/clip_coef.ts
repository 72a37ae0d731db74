// clip_coef(norm){max_norm}: min(1, max_norm / (norm + 1e-6)), the factor torch's clip_grad_norm_ scales by.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireScalar } from "./internal-rules.js";
import { num, opError } from "./shape-rules.js";

/** Added to the norm before dividing, as in torch.nn.utils.clip_grad_norm_. */
export const CLIP_EPS = 1e-6;

export const clip_coef: OpDef = defineInternalOp({
  name: "clip_coef",
  summary: "Gradient clipping factor min(1, max_norm / (norm + 1e-6)) from the global norm.",
  inputs: ["norm"],
  attrs: [{ name: "max_norm", type: "float", doc: "The largest global gradient norm left unscaled." }],
  validate: (attrs) => (num(attrs, "max_norm") > 0 ? undefined : opError("FSM409", `clip_coef: max_norm must be positive`)),
  infer: ([norm]) => requireScalar("clip_coef", norm!, "norm") ?? { dtype: "f32", shape: [] },
});
