// attention_grad_input(dy, x, qkv.weight, [qkv.bias], proj.weight): the backward of fused attention up to its
// input. Like FlashAttention it keeps nothing from the forward but x: it recomputes QKV, the probabilities
// and the context, and hands dqkv and the context on to the weight-gradient ops (linear_grad_weight, sum_to).
import { dim } from "../dim.js";
import type { OpDef } from "../op-def.js";
import type { Attrs, TensorType } from "../types.js";
import { attention, attentionWidths } from "./attention.js";
import { defineInternalOp, requireSameShape } from "./internal-rules.js";
import { bool, firstError, num, requireLastDim } from "./shape-rules.js";

/** Width of the packed projection: query heads, then key heads, then value heads, each d / heads wide. */
export function qkvWidth(attrs: Attrs): number {
  return attentionWidths(attrs).qkv;
}

export const attention_grad_input: OpDef = defineInternalOp({
  name: "attention_grad_input",
  summary: "Backward of attention to its input: outputs dx, dqkv (for the QKV weight gradient) and the recomputed context (for the output projection's).",
  inputs: ["dy", "x", "qkv.weight", "qkv.bias", "proj.weight"],
  inputsFor: (attrs) => (bool(attrs, "bias") ? ["dy", "x", "qkv.weight", "qkv.bias", "proj.weight"] : ["dy", "x", "qkv.weight", "proj.weight"]),
  // The forward op's attributes, copied unchanged so the kernel recomputes exactly what the forward did.
  attrs: attention.attrs,
  validate: (attrs) => attention.validate!(attrs),
  outputs([dy, x, ...ws], attrs) {
    const d = num(attrs, "d");
    const bad = firstError(requireSameShape("attention_grad_input", dy!, x!), requireLastDim("attention_grad_input", x!, d));
    if (bad) return bad;
    const { qkv, context } = attentionWidths(attrs);
    const wq = ws[0]!;
    const wp = ws[ws.length - 1]!;
    const shapeBad = firstError(
      requireSameShape("attention_grad_input", wq, { dtype: wq.dtype, shape: [dim(qkv), dim(d)] }, "qkv.weight and its expected shape"),
      requireSameShape("attention_grad_input", wp, { dtype: wp.dtype, shape: [dim(d), dim(context)] }, "proj.weight and its expected shape"),
    );
    if (shapeBad) return shapeBad;
    const lead = x!.shape.slice(0, -1);
    const out: TensorType[] = [x!, { dtype: x!.dtype, shape: [...lead, dim(qkv)] }, { dtype: x!.dtype, shape: [...lead, dim(context)] }];
    return out;
  },
});
