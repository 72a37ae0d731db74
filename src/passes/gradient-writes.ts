// Where a stage's backward first writes each parameter's gradient. A runtime creates a parameter's gradient
// buffer (a replicated stage's accumulator, an FSDP unit's unsharded gradient) at that op, not when the
// backward starts: an output layer's logits gradient is made and freed before the head's weight gradient
// exists. A tied weight's contributions are partials summed by weight_grad adds; its first partial is its
// first write.
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import { numel } from "../graph/dim.js";

export interface GradientWrite {
  readonly param: string;
  readonly op: OpId;
  readonly layer: number;
  readonly numel: number;
}

/** Per tensor that is a parameter's gradient or a partial of it: the parameter. */
export function gradientOwners(g: Graph): ReadonlyMap<TensorId, string> {
  const owner = new Map<TensorId, string>();
  for (const [name, t] of g.paramGrads()) {
    const stack = [t];
    while (stack.length > 0) {
      const x = stack.pop()!;
      if (owner.has(x)) continue;
      owner.set(x, name);
      const p = g.tensor(x).producer;
      if (p !== undefined && isPartialSum(g, p)) stack.push(...g.op(p).inputs);
    }
  }
  return owner;
}

const isPartialSum = (g: Graph, op: OpId): boolean => {
  const o = g.op(op);
  return o.op === "add" && o.phase === "weight_grad";
};

/** Each parameter whose gradient layers [start, end) make, at its first write in backward run order (layers
 *  descending, each layer's ops in graph order); the list is in that order. */
export function firstGradientWrites(g: Graph, start: number, end: number, owners: ReadonlyMap<TensorId, string>): GradientWrite[] {
  const layers = g.layers();
  const seen = new Set<string>();
  const out: GradientWrite[] = [];
  for (let l = end - 1; l >= start; l--) {
    for (const id of layers[l]!.ops) {
      const o = g.op(id);
      if ((o.phase !== "backward" && o.phase !== "weight_grad") || isPartialSum(g, id)) continue;
      for (const t of o.outputs) {
        const param = owners.get(t);
        if (param === undefined || seen.has(param)) continue;
        seen.add(param);
        out.push({ param, op: id, layer: l, numel: numel(g.tensor(t).type.shape) });
      }
    }
  }
  return out;
}

/** Per group of parameters (an FSDP unit): its first write in `writes`' order (the backward's run order), the
 *  op that makes the group's gradient buffer. Parameters `groupOf` puts in no group are skipped. */
export function firstWriteByGroup<K>(writes: readonly GradientWrite[], groupOf: (param: string) => K | undefined): Map<K, GradientWrite> {
  const first = new Map<K, GradientWrite>();
  for (const w of writes) {
    const k = groupOf(w.param);
    if (k !== undefined && !first.has(k)) first.set(k, w);
  }
  return first;
}
