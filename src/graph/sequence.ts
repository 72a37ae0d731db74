// What the symbol S stands for in a graph: the model's sequence, or — in a sequence-parallel rank's graph
// (src/passes/tensor-parallel.ts) — the rank's part of it, the model's inputs then reading c·S positions.
// Every place that binds S from a plan's or a train section's sequence length asks here, so S is bound to
// seq / c and every shape comes out as the rank holds it.
import type { Graph } from "./graph.js";

/** How many times S the model's inputs' sequence is (1 for a model's own graph). */
export function sequenceMultiple(g: Graph): number {
  for (const t of g.inputs()) {
    for (const d of g.tensor(t).type.shape) if (d.syms.S === 1) return d.coef;
  }
  return 1;
}

/** S for a sequence of `seq` positions: seq itself, or a sequence-parallel rank's part of it. */
export function sequenceSymbol(g: Graph, seq: number): number {
  const c = sequenceMultiple(g);
  if (seq % c !== 0) throw new Error(`internal: a sequence of ${seq} does not split into ${c} parts`);
  return seq / c;
}
