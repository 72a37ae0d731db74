// Test helpers: build graphs the way the checker does (parameters from the registry's params(), operands =
// tensor inputs then parameters), plus shorthand tensor types.
import { dim, symDim, type Dim } from "../../src/graph/dim.js";
import type { Graph, TensorId } from "../../src/graph/graph.js";
import { isOpCheckError } from "../../src/graph/op-def.js";
import { getOp } from "../../src/graph/registry.js";
import type { Attrs, DType, ParamRef, TensorType } from "../../src/graph/types.js";

export const B = symDim("B");
export const S = symDim("S");

/** `ty("f32", B, S, 768)` → f32[B, S, 768]. */
export function ty(dtype: DType, ...dims: (Dim | number)[]): TensorType {
  return { dtype, shape: dims.map((d) => (typeof d === "number" ? dim(d) : d)) };
}

/** Emits one op: creates a module op's parameters under `scope` (a `tie` attribute aliases the tied one), infers the
 *  output type with the registry, and adds the op. Throws on a rule violation (tests build valid graphs). */
export function emit(
  g: Graph,
  op: string,
  inputs: readonly TensorId[],
  attrs: Attrs,
  at: { scope: string; layer: number },
): TensorId {
  const def = getOp(op);
  if (!def) throw new Error(`no op ${op}`);
  const bad = def.validate?.(attrs);
  if (bad) throw new Error(bad.message);
  const paramIds = (def.params?.(attrs) ?? []).map((p) => {
    const name = `${at.scope}.${p.name}`;
    const tie = attrs.tie as ParamRef | undefined;
    if (tie && p.name === def.tieParam) {
      g.aliasParam(name, tie.name);
      return g.param(tie.name)!.tensor;
    }
    return g.addParam({ name, type: { dtype: "f32", shape: p.shape }, init: p.init, layer: at.layer, scope: at.scope });
  });
  const out = def.infer(inputs.map((t) => g.tensor(t).type), attrs);
  if (isOpCheckError(out)) throw new Error(out.message);
  return g.addOp({ op, attrs, inputs: [...inputs, ...paramIds], outputTypes: [out], scope: at.scope, layer: at.layer })[0]!;
}

/** A GPT in the shape of samples/gpt2-124m.fsm: embed layer, one layer per block, head layer; tied lm_head. */
export function buildGpt(
  g: Graph,
  c: { vocab: number; ctx: number; d: number; heads: number; nLayer: number },
): void {
  const tokens = g.addInput("tokens", ty("i32", B, S));
  const targets = g.addInput("targets", ty("i32", B, S));
  const embed = g.addLayer("embed");
  const tok = emit(g, "embedding", [tokens], { num: c.vocab, dim: c.d }, { scope: "wte", layer: embed });
  const pos = emit(g, "positions", [], { n: S }, { scope: "", layer: embed });
  const pe = emit(g, "embedding", [pos], { num: c.ctx, dim: c.d }, { scope: "wpe", layer: embed });
  let h = emit(g, "add", [tok, pe], {}, { scope: "", layer: embed });
  for (let i = 0; i < c.nLayer; i++) h = gptBlock(g, h, c.d, c.heads, `layers.${i}`, g.addLayer(`layers.${i}`));
  const head = g.addLayer("head");
  const n = emit(g, "layer_norm", [h], { d: c.d }, { scope: "ln_f", layer: head });
  const wte = g.param("wte.weight")!;
  const tie: ParamRef = { kind: "ParamRef", name: wte.name, type: wte.type };
  const logits = emit(g, "linear", [n], { in: c.d, out: c.vocab, bias: false, tie }, { scope: "lm_head", layer: head });
  g.setLoss(emit(g, "cross_entropy", [logits, targets], {}, { scope: "", layer: head }));
}

/** samples/lib/transformer.fsm's GPTBlock: h = x + attn(ln_1(x)); out = h + mlp(ln_2(h)). */
export function gptBlock(g: Graph, x: TensorId, d: number, heads: number, scope: string, layer: number): TensorId {
  const at = (s: string) => ({ scope: `${scope}.${s}`, layer });
  const a = emit(g, "attention", [emit(g, "layer_norm", [x], { d }, at("ln_1"))], { d, heads, causal: true }, at("attn"));
  const h = emit(g, "add", [x, a], {}, { scope, layer });
  const fc = emit(g, "linear", [emit(g, "layer_norm", [h], { d }, at("ln_2"))], { in: d, out: 4 * d }, at("mlp.fc"));
  const m = emit(g, "linear", [emit(g, "gelu", [fc], {}, at("mlp"))], { in: 4 * d, out: d }, at("mlp.proj"));
  return emit(g, "add", [h, m], {}, { scope, layer });
}
