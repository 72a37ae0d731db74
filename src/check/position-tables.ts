// A position table must have a row for every position the model looks up: `wpe(positions(S))` with
// wpe = embedding(ctx, d) needs ctx >= S. The lengths are known once train.seq (and batch) are: refuse it here
// rather than as an embedding kernel's out-of-range index in the first step.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import { dimToString, evalDim, SYMBOLIC_DIMS, type SymbolName } from "../graph/dim.js";
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import { dimAttr, num } from "../graph/ops/shape-rules.js";

/** Ops that move index values without changing them, between positions() and the embedding reading them. */
const MOVES_VALUES = new Set(["reshape", "transpose"]);

export function checkPositionTables(
  diags: Diagnostic[],
  g: Graph,
  spans: ReadonlyMap<OpId, Span>,
  bindings: Readonly<Partial<Record<SymbolName, number>>>,
): void {
  for (const id of g.topoOrder()) {
    const o = g.op(id);
    if (o.op !== "embedding") continue;
    const source = positionsSource(g, o.inputs[0]!);
    if (source === undefined) continue;
    const n = dimAttr(g.op(source).attrs, "n");
    const unbound = SYMBOLIC_DIMS.filter((s) => n.syms[s] && bindings[s] === undefined);
    if (unbound.length > 0) continue;
    const length = evalDim(n, bindings);
    const rows = num(o.attrs, "num");
    if (length <= rows) continue;
    const at = SYMBOLIC_DIMS.filter((s) => n.syms[s]).map((s) => `${s} = ${bindings[s]}`);
    const span = spans.get(id) ?? spans.get(source);
    if (!span) continue;
    diags.push(
      error(
        "FSM409",
        `positions(${dimToString(n)}) runs to position ${length - 1}${at.length > 0 ? ` at ${at.join(", ")}` : ""}, but '${o.scope}' has ${rows} rows: it needs at least ${length}`,
        span,
      ),
    );
  }
}

/** The positions op whose values reach tensor t unchanged, if any. */
function positionsSource(g: Graph, t: TensorId): OpId | undefined {
  for (let p = g.tensor(t).producer; p !== undefined; ) {
    const o = g.op(p);
    if (o.op === "positions") return p;
    if (!MOVES_VALUES.has(o.op)) return undefined;
    p = g.tensor(o.inputs[0]!).producer;
  }
  return undefined;
}
