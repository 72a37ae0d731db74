// The vocabulary an i32 model input indexes, for data sources that make or check token ids.
import type { Graph, TensorId } from "../graph/graph.js";
import { partsOf } from "../graph/ops/tensor-parallel-rules.js";

/** The rows of the embeddings that read `t`, or the classes of the cross-entropy it is the target of (the least
 *  of them). In a tensor-parallel rank's graph a vocabulary-parallel op holds 1/parts of them: the whole
 *  model's vocabulary is parts times that. */
export function vocabOf(g: Graph, t: TensorId): number | undefined {
  const sizes: number[] = [];
  for (const id of g.consumers(t)) {
    const o = g.op(id);
    const parts = partsOf(o.attrs);
    if (o.op === "embedding" && typeof o.attrs.num === "number") sizes.push(o.attrs.num * parts);
    if (o.op === "cross_entropy" && o.inputs[1] === t) {
      const last = g.tensor(o.inputs[0]!).type.shape.at(-1);
      if (last && Object.keys(last.syms).length === 0) sizes.push(last.coef * parts);
    }
  }
  return sizes.length === 0 ? undefined : Math.min(...sizes);
}
