// Tensor parallelism (Megatron-LM's column/row split, Shoeybi et al. 2019): rewrites a checked forward graph
// into the graph ONE rank of a tensor-parallel group of `degree` ranks runs — the local shapes of its
// weights, and the group's collectives as ops (tp_copy, tp_all_reduce, tp_all_gather). Every later phase
// (autodiff, cost, memory, schedule, search) then prices exactly what a tensor rank does, with no special
// case of its own. Each parameter records which slice of the whole one a rank holds (ParamSplit).
//
// Every value carries a layout over the group: R (each rank holds it whole), S (each rank holds a 1/degree
// slice of its last dimension) or P (each rank holds a partial sum). The rules, in Megatron's terms:
//   - linear on R, out divisible: column-parallel (tp_copy, then W's rows of this rank) → S;
//   - linear on S: row-parallel (W's columns of this rank, no bias) → P, all-reduce → R, then the bias;
//   - attention on R: tp_copy, this rank's heads (query and GQA key/value heads alike) and the output
//     projection's columns → P, all-reduce → R, then the output bias;
//   - embedding of token ids (a model input): vocabulary-parallel, this rank's rows → P, all-reduce → R;
//     a tied head then holds the same rows, so its logits are S, and cross_entropy on S logits is
//     vocabulary-parallel (three row statistics all-reduced instead of gathering the logits);
//   - elementwise ops keep S when every operand is S of the same shape; every other op (norms, position
//     embeddings, reshapes, losses on R) needs R, so S operands are all-gathered and P ones all-reduced.
// So a GPT or Llama block costs one all-reduce forward and one backward per attention and per MLP, as in
// Megatron. Heads, key/value heads and vocabularies that do not divide are the user's error, reported with
// a location by the checker (tensorParallelProblems); the pass itself refuses them as internal.
//
// Sequence parallelism (Korthikanti et al. 2022) adds a fourth layout, Q: each rank holds 1/degree of the
// sequence. In such a rank's graph the symbol S is the rank's part of the sequence, so the whole sequence is
// degree·S (model inputs, positions, and every value of a tensor-parallel region). Then
//   - a region's partial result is reduce-scattered into Q (tp_reduce_scatter) instead of all-reduced, and a
//     region is entered from Q by an all-gather whose backward reduce-scatters (tp_seq_gather) instead of
//     tp_copy: the same bytes as Megatron's all-reduces, split in two;
//   - norms and elementwise ops with a Q operand run on the rank's part of the sequence (R operands are
//     sliced; a replicated parameter, or a replicated value without a sequence, passes through tp_copy so
//     its gradient, summed over each rank's part of the sequence, is all-reduced over the group);
//   - any other op reads Q values whole (all-gathered, keeping its part of the gradient).
// Values without a sequence dimension (mlp's [B, d]) stay as tensor parallelism alone would have them.
import { dim, dimDiv, isConcrete, shapeEq, type Dim } from "../graph/dim.js";
import { Graph, type OpNode, type ParamInfo, type ParamSplit, type TensorId } from "../graph/graph.js";
import { inferOutputs, type OpCheckError, type OpDef } from "../graph/op-def.js";
import { attentionWidths } from "../graph/ops/attention.js";
import { splitsVocabulary, tensorParallelProblems } from "../graph/tensor-parallel-problems.js";
import { num } from "../graph/ops/shape-rules.js";
import { getOp } from "../graph/registry.js";
import type { Attrs, AttrValue, ParamRef, TensorType } from "../graph/types.js";

export interface TensorParallelOptions {
  /** Ranks in the tensor-parallel group (1: the graph is returned as it is). */
  readonly degree: number;
  /** Megatron's sequence parallelism: norms and the residual stream split along the sequence. */
  readonly sequenceParallel: boolean;
}

/** A model the pass cannot split `degree` ways: which op, and why (the checker adds the location). */

type Layout = "R" | "S" | "P" | "Q";
type At = { readonly scope: string; readonly layer: number };
interface Value {
  readonly t: TensorId;
  readonly layout: Layout;
}

const ELEMENTWISE_UNARY = new Set(["gelu", "relu", "silu", "scale"]);
const ELEMENTWISE_BINARY = new Set(["add", "sub", "mul", "div"]);
/** Ops that compute each position of the sequence on its own: they run on a rank's part of it (Q). */
const TOKEN_WISE = new Set([...ELEMENTWISE_UNARY, ...ELEMENTWISE_BINARY, "layer_norm", "rms_norm"]);

export function splitForTensorParallel(forward: Graph, options: TensorParallelOptions): Graph {
  if (options.degree === 1) return forward;
  const problems = tensorParallelProblems(forward, options.degree);
  if (problems.length > 0) throw new Error(`internal: the tensor-parallel pass was given a model it cannot split: ${problems[0]!.message}`);
  return new Splitter(forward, options.degree, options.sequenceParallel).run();
}

/** The dimension of a type that is the sequence (the one holding S, to the first power), if any. */
function seqAxis(type: TensorType): number | undefined {
  const i = type.shape.findIndex((d) => d.syms.S === 1);
  return i < 0 ? undefined : i;
}

class Splitter {
  private readonly out: Graph;
  /** Old tensor → its value in the split graph. */
  private readonly values = new Map<TensorId, Value>();
  /** Old tensor → its R version, once one consumer needed it gathered or reduced (later ones reuse it). */
  private readonly whole = new Map<TensorId, TensorId>();
  /** Old parameter tensor → the split graph's parameter and how it is split. */
  private readonly params = new Map<TensorId, { t: TensorId; split?: ParamSplit }>();
  private readonly paramOf = new Map<TensorId, ParamInfo>();

  /** Old tensor → its Q version, once one consumer needed it sequence-split (later ones reuse it). */
  private readonly seqParts = new Map<TensorId, TensorId>();
  /** Old parameter tensor → tp_copy of it, read by sequence-split ops (its gradient all-reduced). */
  private readonly seqParams = new Map<TensorId, TensorId>();

  constructor(
    private readonly g: Graph,
    private readonly t: number,
    private readonly sp: boolean,
  ) {
    this.out = new Graph(g.model);
    for (const p of g.params()) this.paramOf.set(p.tensor, p);
  }

  run(): Graph {
    for (const l of this.g.layers()) this.out.addLayer(l.name, l.annotations);
    for (const i of this.g.inputs()) {
      const info = this.g.tensor(i);
      this.values.set(i, { t: this.out.addInput(info.name, this.wholeType(info.type)), layout: "R" });
    }
    for (const o of this.g.ops()) this.rewrite(o);
    // Parameters no op reads travel whole.
    for (const p of this.g.params()) if (!this.params.has(p.tensor)) this.param(p.tensor);
    for (const [alias, target] of this.g.aliases()) this.out.aliasParam(alias, target);
    const loss = this.g.loss;
    if (loss !== undefined) this.out.setLoss(this.toWhole(loss, this.lastOpAt()));
    return this.out;
  }

  private rewrite(o: OpNode): void {
    const def = getOp(o.op)!;
    const at = { scope: o.scope, layer: o.layer };
    const x = o.inputs[0];
    const layout = x === undefined ? undefined : this.values.get(x)?.layout;
    if (o.op === "linear") return this.linear(o, def, layout!);
    if (o.op === "attention") return this.attention(o, def);
    if (o.op === "embedding" && splitsVocabulary(this.g, o)) return this.vocabEmbedding(o, def);
    if (o.op === "cross_entropy" && layout === "S") {
      const [y] = this.emit(def, o, [this.values.get(x!)!.t, this.toWhole(o.inputs[1]!, at)], { ...o.attrs, parts: this.t }, o.outputs);
      return this.set(o.outputs[0]!, y!, "R");
    }
    if (ELEMENTWISE_UNARY.has(o.op) && layout === "S") return this.keepSplit(o, def);
    if (ELEMENTWISE_BINARY.has(o.op) && o.inputs.every((i) => this.isSplitLike(i, o.inputs[0]!))) return this.keepSplit(o, def);
    if (TOKEN_WISE.has(o.op) && o.inputs.some((i) => this.values.get(i)?.layout === "Q")) return this.onSequenceParts(o, def);
    // Anything else runs whole on every rank, on whole operands.
    const inputs = o.inputs.map((i) => (this.g.tensor(i).kind === "param" ? this.param(i).t : this.toWhole(i, at)));
    const outs = this.emit(def, o, inputs, this.localAttrs(o.attrs), o.outputs);
    o.outputs.forEach((t, k) => this.set(t, outs[k]!, "R"));
  }

  /** A token-wise op with a sequence-split operand: every operand brought to the rank's part of the sequence
   *  (those without a sequence pass through tp_copy, so their gradients are summed over the group). */
  private onSequenceParts(o: OpNode, def: OpDef): void {
    const at = { scope: o.scope, layer: o.layer };
    const inputs = o.inputs.map((i) => {
      if (this.g.tensor(i).kind === "param") return this.seqParam(i, at);
      if (seqAxis(this.g.tensor(i).type) !== undefined) return this.toSeq(i, at);
      return this.collective("tp_copy", this.toWhole(i, at), at);
    });
    const [y] = this.emit(def, o, inputs, o.attrs, o.outputs);
    this.set(o.outputs[0]!, y!, "Q");
  }

  /** An elementwise op on S operands: the same op on every rank's slice. */
  private keepSplit(o: OpNode, def: OpDef): void {
    const [y] = this.emit(def, o, o.inputs.map((i) => this.values.get(i)!.t), o.attrs, o.outputs);
    this.set(o.outputs[0]!, y!, "S");
  }

  private isSplitLike(i: TensorId, first: TensorId): boolean {
    const v = this.values.get(i);
    return v?.layout === "S" && sameShape(this.g.tensor(i).type, this.g.tensor(first).type);
  }

  private linear(o: OpNode, def: OpDef, layout: Layout): void {
    const at = { scope: o.scope, layer: o.layer };
    const [x, w, b] = o.inputs as [TensorId, TensorId, TensorId | undefined];
    const inF = num(o.attrs, "in");
    const outF = num(o.attrs, "out");
    const tie = o.attrs["tie"] as ParamRef | undefined;
    const tiedSplit = tie ? this.param(w).split : undefined;
    const column = tie ? tiedSplit?.axis === 0 : layout !== "S" && outF % this.t === 0;
    if (column) {
      const xs = this.enterRegion(x, at);
      const weight = this.param(w, { axis: 0, parts: this.t, blocks: [outF] });
      const inputs = [xs, weight.t, ...(b === undefined ? [] : [this.param(b, { axis: 0, parts: this.t, blocks: [outF] }).t])];
      const [y] = this.emit(def, o, inputs, this.localAttrs({ ...o.attrs, out: outF / this.t }), o.outputs);
      return this.set(o.outputs[0]!, y!, "S");
    }
    if (layout === "S" && !tie) {
      const weight = this.param(w, { axis: 1, parts: this.t, blocks: [inF] });
      const [partial] = this.emit(def, o, [this.values.get(x)!.t, weight.t], { ...o.attrs, in: inF / this.t, bias: false }, []);
      return this.leaveRegion(o, partial!, b);
    }
    const [y] = this.emit(def, o, [this.toWhole(x, at), this.param(w).t, ...(b === undefined ? [] : [this.param(b).t])], this.localAttrs(o.attrs), o.outputs);
    this.set(o.outputs[0]!, y!, "R");
  }

  private attention(o: OpNode, def: OpDef): void {
    const at = { scope: o.scope, layer: o.layer };
    const whole = attentionWidths(o.attrs);
    const d = num(o.attrs, "d");
    const attrs = { ...o.attrs, parts: this.t };
    // Operands: x, qkv.weight, [qkv.bias], proj.weight, [proj.bias] (the registry's params() order).
    const names = (def.params!(o.attrs)).map((p) => p.name);
    const operand = (name: string): TensorId | undefined => {
      const k = names.indexOf(name);
      return k < 0 ? undefined : o.inputs[1 + k];
    };
    const qkvBlocks = { axis: 0, parts: this.t, blocks: [whole.context, whole.kvHeads * whole.headDim, whole.kvHeads * whole.headDim] };
    const qkvBias = operand("qkv.bias");
    const inputs = [
      this.enterRegion(o.inputs[0]!, at),
      this.param(operand("qkv.weight")!, qkvBlocks).t,
      ...(qkvBias === undefined ? [] : [this.param(qkvBias, qkvBlocks).t]),
      this.param(operand("proj.weight")!, { axis: 1, parts: this.t, blocks: [d] }).t,
    ];
    const [partial] = this.emit(def, o, inputs, attrs, []);
    this.leaveRegion(o, partial!, operand("proj.bias"));
  }

  private vocabEmbedding(o: OpNode, def: OpDef): void {
    const at = { scope: o.scope, layer: o.layer };
    const rows = num(o.attrs, "num");
    const weight = this.param(o.inputs[1]!, { axis: 0, parts: this.t, blocks: [rows] });
    const [partial] = this.emit(def, o, [this.toWhole(o.inputs[0]!, at), weight.t], { ...o.attrs, num: rows / this.t, parts: this.t }, []);
    this.leaveRegion(o, partial!, undefined);
  }

  /** A tensor-parallel region's input: x whole on every rank, its gradient summed over the group (tp_copy),
   *  or, sequence-split, all-gathered with the gradient reduce-scattered back (tp_seq_gather). */
  private enterRegion(x: TensorId, at: At): TensorId {
    const v = this.values.get(x);
    if (v?.layout === "Q") return this.collective("tp_seq_gather", v.t, at, this.axisAttr(v.t));
    return this.collective("tp_copy", this.toWhole(x, at), at);
  }

  /** A region's partial result made whole (all-reduce → R) or, under sequence parallelism when it has a
   *  sequence, summed into the ranks' parts of it (reduce-scatter → Q); then the op's bias, as o's output. */
  private leaveRegion(o: OpNode, partial: TensorId, bias: TensorId | undefined): void {
    const at = { scope: o.scope, layer: o.layer };
    const split = this.sp && seqAxis(this.out.tensor(partial).type) !== undefined;
    const y = split ? this.collective("tp_reduce_scatter", partial, at, this.axisAttr(partial)) : this.collective("tp_all_reduce", partial, at);
    const withBias = bias === undefined ? y : this.emit(getOp("add")!, o, [y, split ? this.seqParam(bias, at) : this.param(bias).t], {}, o.outputs)[0]!;
    this.set(o.outputs[0]!, withBias, split ? "Q" : "R");
  }

  /** The old tensor as the ranks' parts of its sequence: as it is (Q), reduce-scattered (P), or the rank's
   *  part of its whole value (R, S), once. */
  private toSeq(old: TensorId, at: At): TensorId {
    const v = this.values.get(old)!;
    if (v.layout === "Q") return v.t;
    const cached = this.seqParts.get(old);
    if (cached !== undefined) return cached;
    const from = v.layout === "P" ? v.t : this.toWhole(old, at);
    const t = this.collective(v.layout === "P" ? "tp_reduce_scatter" : "tp_slice", from, at, this.axisAttr(from));
    this.seqParts.set(old, t);
    return t;
  }

  /** A replicated parameter read on the ranks' parts of the sequence: through tp_copy, so each rank's partial
   *  gradient is all-reduced over the group. */
  private seqParam(old: TensorId, at: At): TensorId {
    let t = this.seqParams.get(old);
    if (t === undefined) this.seqParams.set(old, (t = this.collective("tp_copy", this.param(old).t, at)));
    return t;
  }

  /** The `axis` attribute of a collective along the sequence of (split-graph) tensor x. */
  private axisAttr(x: TensorId): Attrs {
    const axis = seqAxis(this.out.tensor(x).type);
    if (axis === undefined) throw new Error(`internal: the tensor-parallel pass split a value without a sequence along it`);
    return { axis };
  }

  /** The split graph's parameter for an old one, created on first use with the split asked for (the first
   *  use decides: a tied weight's later uses follow its owner's split). */
  private param(old: TensorId, split?: ParamSplit): { t: TensorId; split?: ParamSplit } {
    const known = this.params.get(old);
    if (known) return known;
    const p = this.paramOf.get(old)!;
    const type = split ? splitType(p.type, split) : p.type;
    const t = this.out.addParam({ name: p.name, type, init: p.init, layer: p.layer, scope: p.scope, ...(split && { split }) });
    const made = split ? { t, split } : { t };
    this.params.set(old, made);
    return made;
  }

  /** Attributes of an op that reads whole values: a tie (a ParamRef) names its parameter by its local type,
   *  and dims holding the sequence (positions' n, a reshape's shape) are the whole sequence. */
  private localAttrs(attrs: Attrs): Attrs {
    const out: Record<string, AttrValue> = {};
    for (const [k, v] of Object.entries(attrs)) {
      if (isParamRef(v)) out[k] = { ...v, type: this.out.tensor(this.param(this.g.param(v.name)!.tensor).t).type };
      else if (Array.isArray(v)) out[k] = (v as readonly Dim[]).map((d) => this.wholeDim(d));
      else if (isDim(v)) out[k] = this.wholeDim(v);
      else out[k] = v;
    }
    return out;
  }

  /** A type of the model as this rank holds it whole: its sequence is degree·S in a sequence-parallel graph. */
  private wholeType(type: TensorType): TensorType {
    return this.sp ? { dtype: type.dtype, shape: type.shape.map((d) => this.wholeDim(d)) } : type;
  }

  private wholeDim(d: Dim): Dim {
    const p = d.syms.S;
    return this.sp && p ? { coef: d.coef * this.t ** p, syms: d.syms } : d;
  }

  /** The old tensor whole on every rank: as it is (R), all-gathered (S, Q) or all-reduced (P), once. */
  private toWhole(old: TensorId, at: At): TensorId {
    if (this.g.tensor(old).kind === "param") return this.param(old).t;
    const v = this.values.get(old)!;
    if (v.layout === "R") return v.t;
    const cached = this.whole.get(old);
    if (cached !== undefined) return cached;
    const t =
      v.layout === "S" ? this.collective("tp_all_gather", v.t, at) : v.layout === "Q" ? this.collective("tp_all_gather", v.t, at, this.axisAttr(v.t)) : this.collective("tp_all_reduce", v.t, at);
    this.whole.set(old, t);
    return t;
  }

  private collective(op: string, x: TensorId, at: At, extra: Attrs = {}): TensorId {
    const attrs = { parts: this.t, ...extra };
    return this.out.addOp({ op, attrs, inputs: [x], outputTypes: [outputType(getOp(op)!, [this.out.tensor(x).type], attrs)], scope: at.scope, layer: at.layer })[0]!;
  }

  /** Adds `def` at o's scope and layer on new operands; outputs named as o's old `named` ones. */
  private emit(def: OpDef, o: OpNode, inputs: readonly TensorId[], attrs: Attrs, named: readonly TensorId[]): TensorId[] {
    const tensorInputs = inputs.slice(0, def.kind === "module" ? def.inputs.length : inputs.length);
    const types = inferOutputs(def, tensorInputs.map((i) => this.out.tensor(i).type), attrs);
    if (!isTypes(types)) throw new Error(`internal: the tensor-parallel pass made an invalid ${o.op} (${o.scope}): ${types.message}`);
    const name = named.length === 1 ? this.g.tensor(named[0]!).name : undefined;
    return this.out.addOp({ op: o.op === def.name ? o.op : def.name, attrs, inputs, outputTypes: types, scope: o.scope, layer: o.layer, ...(name !== undefined && { name }) });
  }

  private set(old: TensorId, t: TensorId, layout: Layout): void {
    this.values.set(old, { t, layout });
  }

  private lastOpAt(): { scope: string; layer: number } {
    const ops = this.g.ops();
    const last = ops[ops.length - 1];
    return last ? { scope: last.scope, layer: last.layer } : { scope: "", layer: 0 };
  }
}

function outputType(def: OpDef, inputs: readonly TensorType[], attrs: Attrs): TensorType {
  const types = inferOutputs(def, inputs, attrs);
  if (!isTypes(types)) throw new Error(`internal: ${def.name}: ${types.message}`);
  return types[0]!;
}

function isTypes(t: readonly TensorType[] | OpCheckError): t is readonly TensorType[] {
  return Array.isArray(t);
}

function sameShape(a: TensorType, b: TensorType): boolean {
  return shapeEq(a.shape, b.shape);
}

/** One rank's type of a parameter split as `split` says. */
export function splitType(whole: TensorType, split: ParamSplit): TensorType {
  const d = whole.shape[split.axis]!;
  const part = isConcrete(d) ? dimDiv(d, dim(split.parts)) : undefined;
  if (!part) throw new Error(`internal: a parameter's dimension ${split.axis} does not split ${split.parts} ways`);
  return { dtype: whole.dtype, shape: whole.shape.map((s, i) => (i === split.axis ? part : s)) };
}

function isParamRef(v: AttrValue): v is ParamRef {
  return typeof v === "object" && !Array.isArray(v) && (v as ParamRef).kind === "ParamRef";
}

function isDim(v: AttrValue): v is Dim {
  return typeof v === "object" && !Array.isArray(v) && "coef" in v && "syms" in v;
}
