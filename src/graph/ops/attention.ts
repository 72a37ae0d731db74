// attention(d, heads, kv_heads, causal, bias, rope): fused multi-head self-attention with a packed QKV
// projection; grouped-query when kv_heads < heads (K and V are shared by heads/kv_heads query heads).
import { dim, evalDim } from "../dim.js";
import { reduceTo } from "../backward-rule.js";
import type { OpDef, ParamSpec } from "../op-def.js";
import { DTYPE_BYTES, type Attrs } from "../types.js";
import { typeToString } from "../types-format.js";
import { ELEMENTWISE_FLOPS, matmulFlops, sumBytes } from "./cost-rules.js";
import { PARTS_ATTR, partsOf } from "./tensor-parallel-rules.js";
import { bool, defineOp, firstError, num, opError, optNum, requireFloat, requireLastDim, requirePositive } from "./shape-rules.js";

/** kv_heads is optional with no constant default: absent means one K/V head per query head (plain MHA). */
export function kvHeads(attrs: Attrs): number {
  return optNum(attrs, "kv_heads") ?? num(attrs, "heads");
}

/** The widths one rank's attention works with. With `parts` = p (set by the tensor-parallel pass) a rank
 *  holds heads/p query heads and kv_heads/p key/value heads of the full head width d/heads: the QKV
 *  projection's rows of those heads (column-parallel) and the output projection's columns (row-parallel),
 *  so its output is a partial sum; the output bias is then not the op's (the pass adds it once, after the
 *  all-reduce). */
export function attentionWidths(attrs: Attrs): { heads: number; kvHeads: number; headDim: number; qkv: number; context: number; projBias: boolean } {
  const parts = partsOf(attrs);
  const heads = num(attrs, "heads");
  const headDim = num(attrs, "d") / heads;
  const local = heads / parts;
  const kv = kvHeads(attrs) / parts;
  return { heads: local, kvHeads: kv, headDim, qkv: (local + 2 * kv) * headDim, context: local * headDim, projBias: bool(attrs, "bias") && parts === 1 };
}

export const attention: OpDef = defineOp({
  name: "attention",
  kind: "module",
  summary: "Fused self-attention: [B, S, d] → [B, S, d] (QKV projection, scaled dot-product, output projection).",
  inputs: ["x"],
  attrs: [
    { name: "d", type: "int", doc: "Model width (x's last dimension)." },
    { name: "heads", type: "int", doc: "Number of query heads; must divide d." },
    { name: "kv_heads", type: "int", optional: true, doc: "Number of key/value heads (default: heads); must divide heads." },
    { name: "causal", type: "bool", default: true, doc: "Mask future positions (decoder-style attention)." },
    { name: "bias", type: "bool", default: true, doc: "Learn biases in the QKV and output projections." },
    { name: "rope", type: "bool", default: false, doc: "Apply rotary position embeddings to queries and keys." },
    PARTS_ATTR,
  ],
  validate(attrs) {
    const bad = requirePositive("attention", attrs, ["d", "heads", "kv_heads"]);
    if (bad) return bad;
    const d = num(attrs, "d");
    const heads = num(attrs, "heads");
    const kv = kvHeads(attrs);
    if (d % heads !== 0) return opError("FSM409", `attention: heads (${heads}) must divide d (${d})`);
    if (heads % kv !== 0) return opError("FSM409", `attention: kv_heads (${kv}) must divide heads (${heads})`);
    // Rotary embeddings rotate pairs of channels, so each head needs an even width.
    if (bool(attrs, "rope") && (d / heads) % 2 !== 0) {
      return opError("FSM409", `attention: rope needs an even head dimension, got d / heads = ${d / heads}`);
    }
    const parts = partsOf(attrs);
    if (kv % parts !== 0) return opError("FSM409", `attention: ${kv === heads ? "heads" : "kv_heads"} (${kv}) must split over tensor_parallel = ${parts} ranks`);
    return undefined;
  },
  params(attrs) {
    const d = num(attrs, "d");
    const w = attentionWidths(attrs);
    const ps: ParamSpec[] = [{ name: "qkv.weight", shape: [dim(w.qkv), dim(d)], init: "normal" }];
    if (bool(attrs, "bias")) ps.push({ name: "qkv.bias", shape: [dim(w.qkv)], init: "zeros" });
    ps.push({ name: "proj.weight", shape: [dim(d), dim(w.context)], init: "normal" });
    if (w.projBias) ps.push({ name: "proj.bias", shape: [dim(d)], init: "zeros" });
    return ps;
  },
  infer([x], attrs) {
    if (x!.shape.length !== 3) {
      return opError("FSM404", `attention expects input of rank 3 [batch, sequence, ${num(attrs, "d")}], got ${typeToString(x!)}`);
    }
    return firstError(requireFloat("attention", x!), requireLastDim("attention", x!, num(attrs, "d"))) ?? x!;
  },
  // FLOPs follow Megatron-LM (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  // Clusters", appendix): the QKV and output projections plus 2·B·S²·d for QKᵀ and 2·B·S²·d for the weighted
  // sum of V, over the full S×S scores (no causal discount); then the score scaling, softmax and rotary
  // embedding per element (ELEMENTWISE_FLOPS). Backward: each product twice (the projections once for dX and
  // once for dW), the elementwise parts at their backward counts. Bytes assume three kernels — the QKV
  // projection, a fused (flash-style) core that never writes the S×S scores, and the output projection — so
  // q/k/v and the core's output are each written once and read once.
  cost(inputs, attrs, b) {
    const [x, ...params] = inputs;
    const [batch, seq, d] = x!.shape.map((s) => evalDim(s, b)) as [number, number, number];
    // One rank's heads (all of them unless the tensor-parallel pass split the op).
    const { heads, kvHeads: kv, headDim, qkv: qkvWidth, context, projBias } = attentionWidths(attrs);
    const tokens = batch * seq;
    const projections = matmulFlops(tokens, d, qkvWidth) + matmulFlops(tokens, context, d);
    const biasFlops = (bool(attrs, "bias") ? tokens * qkvWidth : 0) + (projBias ? tokens * d : 0);
    const core = 2 * batch * seq * seq * context + 2 * batch * seq * seq * context;
    const scores = batch * heads * seq * seq;
    const rotated = bool(attrs, "rope") ? tokens * (heads + kv) * headDim : 0;
    const f = ELEMENTWISE_FLOPS;
    const size = DTYPE_BYTES[x!.dtype];
    const intermediates = tokens * (qkvWidth + context) * size;
    return {
      forwardFlops:
        projections + biasFlops + core + scores * (f.attention_scale.forward + f.softmax.forward) + rotated * f.rope.forward,
      backwardFlops: {
        input: projections + 2 * core + scores * (f.attention_scale.backward + f.softmax.backward) + rotated * f.rope.backward,
        weight: projections + biasFlops,
      },
      bytesRead: sumBytes([x!, ...params], b) + intermediates,
      bytesWritten: intermediates + tokens * d * size,
      unit: "matrix",
    };
  },
  // One input-gradient op recomputes the attention from x (FlashAttention-style: nothing else is saved) and
  // gives dx, dqkv and the context; the weight gradients are then those of the two linear projections.
  backward({ inputs, dy, attrs, wants }, e) {
    const bias = bool(attrs, "bias");
    const [x, wqkv] = [inputs[0]!, inputs[1]!];
    const wproj = inputs[bias ? 3 : 2]!;
    const [dx, dqkv, ctx] = e.inputMany("attention_grad_input", bias ? [dy, x, wqkv, inputs[2]!, wproj] : [dy, x, wqkv, wproj], attrs);
    const dWqkv = wants[1] ? e.weight("linear_grad_weight", [dqkv!, x]) : undefined;
    const dWproj = wants[bias ? 3 : 2] ? e.weight("linear_grad_weight", [dy, ctx!]) : undefined;
    if (!bias) return [dx, dWqkv, dWproj];
    const dbqkv = wants[2] ? reduceTo(e, dqkv!, e.type(inputs[2]!).shape, "weight") : undefined;
    if (!attentionWidths(attrs).projBias) return [dx, dWqkv, dbqkv, dWproj];
    const dbproj = wants[4] ? reduceTo(e, dy, e.type(inputs[4]!).shape, "weight") : undefined;
    return [dx, dWqkv, dbqkv, dWproj, dbproj];
  },
});
