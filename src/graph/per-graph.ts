// Analyses of a graph that several passes ask for (the plan search, then compile's stage costs, of the same
// training graph): each found once per graph and kept while the graph has the same ops. Graphs only grow
// (addOp), so an unchanged op count means an unchanged graph; what is kept is read-only to its callers.
import type { Graph } from "./graph.js";

export function perGraph<T>(analyse: (g: Graph) => T): (g: Graph) => T {
  const found = new WeakMap<Graph, { readonly ops: number; readonly value: T }>();
  return (g) => {
    const ops = g.ops().length;
    const kept = found.get(g);
    if (kept && kept.ops === ops) return kept.value;
    const value = analyse(g);
    found.set(g, { ops, value });
    return value;
  };
}
