// Whether a forward graph splits over a tensor-parallel group of some degree, op by op: what the checker
// reports as FSM507, the search uses to choose degrees, and the tensor-parallel pass (src/passes) asserts.
import type { Graph, OpNode } from "./graph.js";
import { kvHeads } from "./ops/attention.js";
import { num } from "./ops/shape-rules.js";

export interface TensorParallelProblem {
  readonly op: number;
  readonly message: string;
}

/** Why `forward` cannot be split `degree` ways, op by op (empty: it can). */
export function tensorParallelProblems(forward: Graph, degree: number): TensorParallelProblem[] {
  if (degree <= 1) return [];
  const problems: TensorParallelProblem[] = [];
  for (const o of forward.ops()) {
    if (o.op === "attention") {
      const heads = num(o.attrs, "heads");
      const kv = kvHeads(o.attrs);
      if (heads % degree !== 0) problems.push({ op: o.id, message: `attention's ${heads} heads do not split over tensor_parallel = ${degree} ranks` });
      else if (kv % degree !== 0) problems.push({ op: o.id, message: `attention's ${kv} key/value heads (kv_heads) do not split over tensor_parallel = ${degree} ranks` });
    } else if (o.op === "embedding" && splitsVocabulary(forward, o) && num(o.attrs, "num") % degree !== 0) {
      problems.push({ op: o.id, message: `the vocabulary (${num(o.attrs, "num")} rows) does not split over tensor_parallel = ${degree} ranks` });
    }
  }
  return problems;
}

/** Token embeddings are vocabulary-parallel: their ids come straight from the model's inputs (position
 *  tables, indexed by positions(S), stay whole on every rank, as in Megatron). */
export function splitsVocabulary(g: Graph, o: OpNode): boolean {
  return g.tensor(o.inputs[0]!).kind === "input";
}

