// attention(d, heads, kv_heads, causal, bias, rope): fused multi-head self-attention with a packed QKV
// projection; grouped-query when kv_heads < heads (K and V are shared by heads/kv_heads query heads).
import { dim } from "../dim.js";
import type { OpDef, ParamSpec } from "../op-def.js";
import type { Attrs } from "../types.js";
import { typeToString } from "../types-format.js";
import { bool, defineOp, firstError, num, opError, optNum, requireFloat, requireLastDim, requirePositive } from "./shape-rules.js";

/** kv_heads is optional with no constant default: absent means one K/V head per query head (plain MHA). */
export function kvHeads(attrs: Attrs): number {
  return optNum(attrs, "kv_heads") ?? num(attrs, "heads");
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
    return undefined;
  },
  params(attrs) {
    const d = num(attrs, "d");
    const heads = num(attrs, "heads");
    const qkv = (heads + 2 * kvHeads(attrs)) * (d / heads);
    const bias = bool(attrs, "bias");
    const ps: ParamSpec[] = [{ name: "qkv.weight", shape: [dim(qkv), dim(d)], init: "normal" }];
    if (bias) ps.push({ name: "qkv.bias", shape: [dim(qkv)], init: "zeros" });
    ps.push({ name: "proj.weight", shape: [dim(d), dim(d)], init: "normal" });
    if (bias) ps.push({ name: "proj.bias", shape: [dim(d)], init: "zeros" });
    return ps;
  },
  infer([x], attrs) {
    if (x!.shape.length !== 3) {
      return opError("FSM404", `attention expects input of rank 3 [batch, sequence, ${num(attrs, "d")}], got ${typeToString(x!)}`);
    }
    return firstError(requireFloat("attention", x!), requireLastDim("attention", x!, num(attrs, "d"))) ?? x!;
  },
});
