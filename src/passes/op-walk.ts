// The walk the working-set passes share: a stage's ops of one phase in the order a runtime runs them
// (layers in the given order, each layer's ops in graph order), and per tensor where it is made and last read.
import type { Graph, OpNode, TensorId } from "../graph/graph.js";

/** Positions in a walk by tensor id; undefined for a tensor the walk does not record. */
export interface Positions {
  get(t: TensorId): number | undefined;
}

export interface OpWalk {
  /** Op ids in run order. */
  readonly order: readonly number[];
  /** Per layer of the walk (in the given order), where its ops begin in `order`; one more entry at the end. */
  readonly begins: readonly number[];
  /** Tensors that count, in the order they are made, each with the position of the op that makes it. */
  readonly madeTensors: readonly TensorId[];
  readonly madePositions: readonly number[];
  /** The same by tensor. */
  readonly made: Positions;
  /** Every tensor an op of the walk reads, by the position of its last reader. */
  readonly lastRead: Positions;
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
  const tensors = g.tensors().length;
  const made = positions(order.length, tensors);
  const lastRead = positions(order.length, tensors);
  const madeTensors: TensorId[] = [];
  const madePositions: number[] = [];
  for (let at = 0; at < order.length; at++) {
    const o = g.op(order[at]!);
    for (const t of o.inputs) lastRead.set(t, at);
    for (const t of o.outputs) {
      if (!counts(o, t)) continue;
      made.set(t, at);
      madeTensors.push(t);
      madePositions.push(at);
    }
  }
  return { order, begins, madeTensors, madePositions, made, lastRead };
}

/** Positions for a walk of `ops` ops over a graph of `tensors` tensors: an array over every tensor id when
 *  the walk covers much of the graph (the search walks the whole model: a Map of its hundreds of thousands
 *  of tensors is most of the walk's time), a Map when it covers a sliver (one stage of a deep pipeline:
 *  an array per stage would make the stages' walks quadratic). */
function positions(ops: number, tensors: number): Positions & { set(t: TensorId, at: number): void } {
  if (8 * ops < tensors) return new Map<TensorId, number>();
  const at = new Int32Array(tensors).fill(-1);
  return {
    get: (t) => (at[t]! < 0 ? undefined : at[t]),
    set: (t, p) => void (at[t] = p),
  };
}
