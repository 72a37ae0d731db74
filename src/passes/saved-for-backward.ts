// Which forward tensors the gradient ops of a training graph read: what a runtime keeps from forward to
// backward per micro-batch (activation memory), and per layer what checkpointing would keep instead.
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import { perGraph } from "../graph/per-graph.js";

/** A forward value: a model input or the output of a forward op (parameters are model state, not saved). */
function isForwardValue(g: Graph, t: TensorId): boolean {
  const info = g.tensor(t);
  if (info.kind === "input") return true;
  return info.producer !== undefined && g.op(info.producer).phase === "forward";
}

/** Per backward and weight_grad op (ascending ids), the forward tensors it reads, ascending, no repeats. */
export function savedForBackward(g: Graph): Map<OpId, TensorId[]> {
  const out = new Map<OpId, TensorId[]>();
  for (const o of g.ops()) {
    if (o.phase !== "backward" && o.phase !== "weight_grad") continue;
    const saved = [...new Set(o.inputs.filter((t) => isForwardValue(g, t)))].sort((a, b) => a - b);
    if (saved.length > 0) out.set(o.id, saved);
  }
  return out;
}

/** The inverse view: each saved forward tensor with the gradient ops that read it. */
export function savedTensors(g: Graph): Map<TensorId, OpId[]> {
  const out = new Map<TensorId, OpId[]>();
  for (const [op, tensors] of savedForBackward(g)) {
    for (const t of tensors) {
      const list = out.get(t);
      if (list) list.push(op);
      else out.set(t, [op]);
    }
  }
  return new Map([...out].sort((a, b) => a[0] - b[0]));
}

export interface LayerSaved {
  readonly layer: number;
  /** Forward tensors read by this layer's gradient ops: kept per micro-batch without checkpointing. */
  readonly saved: readonly TensorId[];
  /** Forward tensors this layer's forward ops read from outside it (model inputs, other layers' outputs):
   *  all a checkpointed layer keeps; its forward is recomputed from them before its backward. */
  readonly boundary: readonly TensorId[];
}

/** Per layer, ascending tensor ids. A tensor read by several layers' gradient ops is listed in each. Found
 *  once per graph: the plan search's layer table and compile's stage costs both ask. */
export const savedByLayer: (g: Graph) => readonly LayerSaved[] = perGraph(findSavedByLayer);

function findSavedByLayer(g: Graph): LayerSaved[] {
  const saved = g.layers().map(() => new Set<TensorId>());
  for (const [op, tensors] of savedForBackward(g)) for (const t of tensors) saved[g.op(op).layer]!.add(t);
  return g.layers().map((l) => {
    const boundary = new Set<TensorId>();
    for (const id of l.ops) {
      const o = g.op(id);
      if (o.phase !== "forward") continue;
      for (const t of o.inputs) {
        const p = g.tensor(t).producer;
        if (g.tensor(t).kind === "input" || (p !== undefined && g.op(p).layer !== l.index)) boundary.add(t);
      }
    }
    const sorted = (s: Set<TensorId>) => [...s].sort((a, b) => a - b);
    return { layer: l.index, saved: sorted(saved[l.index]!), boundary: sorted(boundary) };
  });
}
