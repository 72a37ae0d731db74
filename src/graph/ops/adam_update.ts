// adam_update(param, grad, exp_avg, exp_avg_sq, step, [clip]): one step of torch.optim.Adam / AdamW in place.
import type { OpDef } from "../op-def.js";
import type { TensorType } from "../types.js";
import { defineInternalOp, requireSameShape, requireScalar } from "./internal-rules.js";
import { bool, firstError } from "./shape-rules.js";

export const adam_update: OpDef = defineInternalOp({
  name: "adam_update",
  summary: "Adam step with bias correction (t = step, already incremented); AdamW's decoupled weight decay when `decoupled`. Outputs the new param, exp_avg and exp_avg_sq.",
  inputs: ["param", "grad", "exp_avg", "exp_avg_sq", "step", "clip"],
  inputsFor: (attrs) => ["param", "grad", "exp_avg", "exp_avg_sq", "step", ...(bool(attrs, "clip") ? ["clip"] : [])],
  attrs: [
    { name: "lr", type: "float", doc: "Learning rate." },
    { name: "beta1", type: "float", doc: "Decay of the first moment (exp_avg)." },
    { name: "beta2", type: "float", doc: "Decay of the second moment (exp_avg_sq)." },
    { name: "eps", type: "float", doc: "Added to the bias-corrected √exp_avg_sq." },
    { name: "weight_decay", type: "float", default: 0, doc: "Adam: L2 penalty added to the gradient; AdamW: decoupled decay p −= lr·wd·p." },
    { name: "decoupled", type: "bool", default: false, doc: "AdamW: decay the weights directly instead of through the gradient." },
    { name: "clip", type: "bool", default: false, doc: "Read a clipping factor that scales the gradient first." },
  ],
  outputs([param, grad, m, v, step, clip], attrs) {
    const bad = firstError(
      requireSameShape("adam_update", param!, grad!, "param and grad"),
      requireSameShape("adam_update", param!, m!, "param and exp_avg"),
      requireSameShape("adam_update", param!, v!, "param and exp_avg_sq"),
      requireScalar("adam_update", step!, "step"),
      bool(attrs, "clip") ? requireScalar("adam_update", clip!, "clip") : undefined,
    );
    if (bad) return bad;
    const out: TensorType[] = [param!, m!, v!];
    return out;
  },
});
