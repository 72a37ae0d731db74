// The vocabulary an i32 model input indexes, for data sources that make or check token ids.
import type { Graph, TensorId } from "../graph/graph.js";

/** The rows of the embeddings that read `t`, or the classes of the cross-entropy it is the target of (the least of them). */
export function vocabOf(g: Graph, t: TensorId): number | undefined {
  const sizes: number[] = [];
  for (const id of g.consumers(t)) {
    const o = g.op(id);
    if (o.op === "embedding" && typeof o.attrs.num === "number") sizes.push(o.attrs.num);
    if (o.op === "cross_entropy" && o.inputs[1] === t) {
      const last = g.tensor(o.inputs[0]!).type.shape.at(-1);
      if (last && Object.keys(last.syms).length === 0) sizes.push(last.coef);
    }
  }
  return sizes.length === 0 ? undefined : Math.min(...sizes);
}
