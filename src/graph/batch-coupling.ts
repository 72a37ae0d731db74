// Does a forward graph keep the samples of a batch apart? Data parallelism and micro-batches (chunks) run the
// model on parts of the batch and average the parts' losses and gradients; that equals the full-batch step
// only when the loss is an average of per-sample terms. The runtime splits every model input by rows (its
// first dimension, B), so this follows, for each tensor, which dimension holds the samples ("lane"):
//   free   no sample in it (parameters, positions(S), what is computed from them only);
//   axis   dimension `axis` holds the samples, each slice depending on its own sample only. `outer` is the
//          factor of that dimension laid out outside B (S after transpose + reshape to [S*B, d]), so a
//          reshape keeps the lane when the flattened layout still reads [prefix][B][per-sample block];
//   mean   an average over the samples (a loss); only affine maps of it (scale, + or · by a free value, a
//          sum of such) are still averages of per-sample terms;
//   mixed  samples mixed by `op`, for the reason `why`.
// An op that reduces or normalizes over the samples' dimension (softmax(x, dim: 0) on [B, d], a Gram matrix
// matmul(transpose(x), x), layer_norm over a dimension holding B), one that pairs two samples' dimensions
// (broadcasting [B, 1, d] against [1, B, d]), positions(B), and a non-affine map of a loss (loss · loss, relu
// of a loss, a loss broadcast back onto the samples) mix samples. The losses' own mean over the batch is fine:
// the runtime averages it over replicas and micro-batches.
import { dim, dimDiv, dimEq, dimMul, dimToString, numelDim, symDim, shapeToString, type Dim, type Shape } from "./dim.js";
import type { Graph, OpId, OpNode, TensorId } from "./graph.js";
import { normalizeAxis, num, shapeAttr, dimAttr } from "./ops/shape-rules.js";
import type { TensorType } from "./types.js";
import { typeToString } from "./types-format.js";

type Lane =
  | { readonly k: "free" }
  | { readonly k: "axis"; readonly axis: number; readonly outer: Dim }
  | { readonly k: "mean" }
  | { readonly k: "mixed"; readonly op: OpId; readonly why: string };

export interface BatchCoupling {
  /** The first op (on the way to the loss) that mixes samples. */
  readonly op: OpId;
  /** Why, naming the op: "softmax over dim 0 normalizes across the batch dimension B". */
  readonly why: string;
}

const FREE: Lane = { k: "free" };
const MEAN: Lane = { k: "mean" };
const B = symDim("B");

/** Why a model input cannot be split into samples by rows (B first, and nowhere else), or undefined. */
export function batchLayoutProblem(name: string, t: TensorType): { readonly message: string; readonly dim: number } | undefined {
  const why = "its rows are the samples that data parallelism and micro-batches split";
  if (t.shape.length === 0 || !dimEq(t.shape[0]!, B)) {
    return { message: `model input '${name}' must have the batch dimension B first, on its own (${why}), got ${typeToString(t)}`, dim: 0 };
  }
  const again = t.shape.findIndex((d, i) => i > 0 && (d.syms.B ?? 0) > 0);
  if (again > 0) {
    return { message: `model input '${name}' has the batch dimension B again in dimension ${again}: B must be its first dimension only (${why}), got ${typeToString(t)}`, dim: again };
  }
  return undefined;
}

/** Where the loss of a forward graph mixes the samples of its batch, or undefined when it does not. Inputs
 *  must satisfy batchLayoutProblem (B first, once). */
export function batchCoupling(g: Graph): BatchCoupling | undefined {
  if (g.loss === undefined) return undefined;
  // By tensor id (an array, not a Map: a deep model's forward graph has hundreds of thousands of tensors).
  const lanes = new Array<Lane>(g.tensors().length).fill(FREE);
  for (const t of g.inputs()) lanes[t] = { k: "axis", axis: 0, outer: dim(1) };
  const laneOf = (t: TensorId): Lane => lanes[t] ?? FREE;
  for (const id of g.topoOrder()) {
    const o = g.op(id);
    const out = opLane(g, o, o.inputs.map(laneOf));
    for (const t of o.outputs) lanes[t] = out;
  }
  const loss = laneOf(g.loss);
  return loss.k === "mixed" ? { op: loss.op, why: loss.why } : undefined;
}

function opLane(g: Graph, o: OpNode, ins: readonly Lane[]): Lane {
  const carried = ins.find((l): l is Extract<Lane, { k: "mixed" }> => l.k === "mixed");
  if (carried) return carried;
  if (o.op === "positions") {
    const n = dimAttr(o.attrs, "n");
    return (n.syms.B ?? 0) > 0 ? mixed(o, `positions(${dimToString(n)}) numbers the samples within the batch dimension B`) : FREE;
  }
  if (ins.every((l) => l.k === "free")) return FREE;
  const rank = (i: number): number => g.tensor(o.inputs[i]!).type.shape.length;
  const x = ins[0]!;
  switch (o.op) {
    case "relu":
    case "gelu":
    case "silu":
      return x.k === "mean" ? mixed(o, `${o.op} of a loss averaged over the batch dimension B is not an average over samples`) : x;
    case "scale":
      return x;
    case "add":
    case "sub":
      return elementwise(g, o, ins, "affine");
    case "mul":
      return elementwise(g, o, ins, "bilinear");
    case "div":
      return ins[1]!.k === "free" ? elementwise(g, o, ins, "affine") : elementwise(g, o, ins, "none");
    case "softmax":
      return reducesOver(o, x, normalizeAxis(num(o.attrs, "dim"), rank(0)), `softmax over dim ${num(o.attrs, "dim")} normalizes across the batch dimension B`);
    case "layer_norm":
    case "rms_norm":
      return reducesOver(o, x, rank(0) - 1, `${o.op} normalizes its last dimension, which holds the batch dimension B`);
    case "linear":
      // Affine in x: a batch average stays one.
      return reducesOver(o, x, rank(0) - 1, "linear contracts its last dimension, which holds the batch dimension B");
    case "embedding":
      // A lookup per id: the ids' sample dimension stays where it is (the output only adds one after it).
      return x;
    case "attention":
      if (x.k === "mean") return mixed(o, "attention of a loss averaged over the batch dimension B is not an average over samples");
      return x.k === "axis" && x.axis !== 0
        ? mixed(o, `attention mixes its sequence and feature dimensions, but dimension ${x.axis} holds the batch dimension B`)
        : x;
    case "matmul":
      return matmulLane(g, o, ins);
    case "transpose": {
      if (x.k !== "axis") return x;
      const [a, b] = [normalizeAxis(num(o.attrs, "dim0"), rank(0)), normalizeAxis(num(o.attrs, "dim1"), rank(0))];
      return { ...x, axis: x.axis === a ? b! : x.axis === b ? a! : x.axis };
    }
    case "reshape":
      return x.k === "axis" ? reshapeLane(o, g.tensor(o.inputs[0]!).type.shape, x) : x;
    case "mse_loss":
    case "cross_entropy":
      return lossLane(g, o, ins);
    default:
      return mixed(o, `${o.op} is not known to keep the samples of the batch dimension B apart`);
  }
}

function mixed(o: OpNode, why: string): Lane {
  return { k: "mixed", op: o.id, why };
}

/** An op that reduces or normalizes over dimension `axis` of its operand. */
function reducesOver(o: OpNode, x: Lane, axis: number | undefined, why: string): Lane {
  if (x.k === "mean") return o.op === "linear" ? x : mixed(o, `${o.op} of a loss averaged over the batch dimension B is not an average over samples`);
  return x.k === "axis" && x.axis === axis ? mixed(o, why) : x;
}

/** Broadcasting elementwise ops. `affine`: sums (and a quotient by a free value) of batch averages stay
 *  averages; `bilinear`: a product of a batch average with a free value does; `none`: nothing with a mean. */
function elementwise(g: Graph, o: OpNode, ins: readonly Lane[], kind: "affine" | "bilinear" | "none"): Lane {
  const n = g.tensor(o.outputs[0]!).type.shape.length;
  const means = ins.filter((l) => l.k === "mean").length;
  const axes = ins.flatMap((l, i) => (l.k === "axis" ? [{ ...l, axis: l.axis + n - g.tensor(o.inputs[i]!).type.shape.length }] : []));
  if (means > 0) {
    if (axes.length > 0) return mixed(o, `${o.op} combines a loss averaged over the batch dimension B with per-sample values`);
    if (kind === "none" || (kind === "bilinear" && means > 1)) return mixed(o, `${o.op} of losses averaged over the batch dimension B is not an average over samples`);
    return MEAN;
  }
  return sameAxis(o, axes, `${o.op} broadcasts the samples of the batch dimension B of its operands against each other`);
}

/** The lane of operands that must hold their samples in the same output dimension, laid out alike. */
function sameAxis(o: OpNode, axes: readonly Extract<Lane, { k: "axis" }>[], why: string): Lane {
  const first = axes[0];
  if (!first) return FREE;
  return axes.every((a) => a.axis === first.axis && dimEq(a.outer, first.outer)) ? first : mixed(o, why);
}

function matmulLane(g: Graph, o: OpNode, ins: readonly Lane[]): Lane {
  if (ins.some((l) => l.k === "mean")) return elementwise(g, o, ins, "bilinear");
  const n = g.tensor(o.outputs[0]!).type.shape.length;
  const axes: Extract<Lane, { k: "axis" }>[] = [];
  for (let i = 0; i < 2; i++) {
    const l = ins[i]!;
    if (l.k !== "axis") continue;
    const r = g.tensor(o.inputs[i]!).type.shape.length;
    // a: [..., n, k] (k contracted), b: [..., k, m] (its k contracted).
    const contracted = i === 0 ? r - 1 : r - 2;
    if (l.axis === contracted) {
      return mixed(o, `matmul contracts dimension ${l.axis} of its ${i === 0 ? "first" : "second"} operand, which holds the batch dimension B`);
    }
    const at = l.axis >= r - 2 ? n - (r - l.axis) : l.axis + n - r;
    axes.push({ ...l, axis: at });
  }
  return sameAxis(o, axes, "matmul pairs the samples of the batch dimension B of its operands");
}

function reshapeLane(o: OpNode, from: Shape, x: Extract<Lane, { k: "axis" }>): Lane {
  const to = shapeAttr(o.attrs, "shape");
  // The elements laid out before the samples: what every per-sample block is preceded by.
  const prefix = dimMul(numelDim(from.slice(0, x.axis)), x.outer);
  for (let k = 0; k < to.length; k++) {
    if ((to[k]!.syms.B ?? 0) === 0) continue;
    const outer = dimDiv(prefix, numelDim(to.slice(0, k)));
    if (outer && dimDiv(to[k]!, dimMul(outer, B))) return { k: "axis", axis: k, outer };
  }
  return mixed(o, `reshape to ${shapeToString(to)} interleaves the batch dimension B with other dimensions`);
}

/** A loss: the mean over all elements of operands that must hold their samples alike; the logits' class
 *  dimension (cross_entropy) is a softmax over it. */
function lossLane(g: Graph, o: OpNode, ins: readonly Lane[]): Lane {
  if (ins.some((l) => l.k === "mean")) return mixed(o, `${o.op} of a loss averaged over the batch dimension B is not an average over samples`);
  const x = ins[0]!;
  if (o.op === "cross_entropy" && x.k === "axis" && x.axis === g.tensor(o.inputs[0]!).type.shape.length - 1) {
    return mixed(o, "cross_entropy normalizes its logits' last dimension, which holds the batch dimension B");
  }
  const axes = ins.filter((l): l is Extract<Lane, { k: "axis" }> => l.k === "axis");
  const paired = sameAxis(o, axes, `${o.op} compares the samples of the batch dimension B of its operands in different dimensions`);
  return paired.k === "mixed" ? paired : axes.length > 0 ? MEAN : FREE;
}
