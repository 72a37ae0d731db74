// The walk the working-set passes share: a stage's ops of one phase in the order a runtime runs them
// (layers in the given order, each layer's ops in graph order), and per tensor where it is made and last read.
import type { Graph, OpNode, TensorId } from "../graph/graph.js";

export interface OpWalk {
  /** Op ids in run order. */
  readonly order: readonly number[];
  /** Per layer of the walk (in the given order), where its ops begin in `order`; one more entry at the end. */
  readonly begins: readonly number[];
  /** Tensors that count, by the position of the op that makes them. */
  readonly made: ReadonlyMap<TensorId, number>;
  /** Every tensor an op of the walk reads, by the position of its last reader. */
  readonly lastRead: ReadonlyMap<TensorId, number>;
}

export function walkOps(g: Graph, layerOrder: readonly number[], takes: (o: OpNode) => boolean, counts: (o: OpNode, t: TensorId) => boolean): OpWalk {
  const layers = g.layers();
  const order: number[] = [];
  const begins: number[] = [];
  for (const l of layerOrder) {
    begins.push(order.length);
    for (const id of layers[l]!.ops) if (takes(g.op(id))) order.push(id);
  }
  begins.push(order.length);
  const made = new Map<TensorId, number>();
  const lastRead = new Map<TensorId, number>();
  order.forEach((id, at) => {
    const o = g.op(id);
    for (const t of o.inputs) lastRead.set(t, at);
    for (const t of o.outputs) if (counts(o, t)) made.set(t, at);
  });
  return { order, begins, made, lastRead };
}
