// The training graph as plan JSON: every op, tensor, parameter, state, update and gradient, by id.
import { dimToString, type Dim } from "../graph/dim.js";
import type { Graph } from "../graph/graph.js";
import type { AttrValue } from "../graph/types.js";
import type { PlanAttr, PlanGraph, PlanOp } from "./plan.js";

const isDim = (v: object): v is Dim => "coef" in v && "syms" in v;

function attrToJson(v: AttrValue): PlanAttr {
  if (typeof v === "number") {
    if (Number.isFinite(v)) return v;
    return { number: Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity" };
  }
  if (typeof v === "boolean" || typeof v === "string") return v;
  if (Array.isArray(v)) return { shape: (v as readonly Dim[]).map(dimToString) };
  const o = v as Exclude<AttrValue, number | boolean | string | readonly Dim[]>;
  if (isDim(o)) return { dim: dimToString(o) };
  return { param: o.name };
}

export function graphToJson(g: Graph): PlanGraph {
  if (g.loss === undefined) throw new Error(`internal: graph '${g.model}' has no loss`);
  // A deep model has hundreds of thousands of ops: their attributes are read key by key (Object.entries' order,
  // without its arrays), half the time of entries and spreads, and their tensor lists are shared, not copied
  // (the graph never changes an op's lists in place, and a plan is read-only: gpt-tiny at 5,000 layers, this
  // list of ops took 0.24–0.29 s with copies, 0.08–0.13 s without).
  const ops = g.ops().map((o): PlanOp => {
    const attrs: Record<string, PlanAttr> = {};
    for (const k in o.attrs) attrs[k] = attrToJson(o.attrs[k]!);
    const op: { -readonly [K in keyof PlanOp]: PlanOp[K] } = { op: o.op, attrs, inputs: o.inputs, outputs: o.outputs, phase: o.phase, layer: o.layer, scope: o.scope };
    if (o.forwardOp !== undefined) op.forwardOp = o.forwardOp;
    return op;
  });
  return {
    inputs: [...g.inputs()],
    loss: g.loss,
    tensors: g.tensors().map((t) => ({ name: t.name, dtype: t.type.dtype, shape: t.type.shape.map(dimToString), kind: t.kind })),
    ops,
    layers: g.layers().map((l) => ({ name: l.name, params: [...l.params], annotations: { ...l.annotations } })),
    params: g.params().map((p) => ({ name: p.name, tensor: p.tensor, layer: p.layer, scope: p.scope, init: p.init, aliases: [...p.aliases], ...(p.split && { split: { axis: p.split.axis, parts: p.split.parts, blocks: [...p.split.blocks] } }) })),
    states: g.states().map((s) => (s.param === undefined ? { name: s.name, tensor: s.tensor, role: s.role } : { name: s.name, tensor: s.tensor, role: s.role, param: s.param })),
    updates: [...g.updates()].map(([a, b]) => [a, b] as const),
    paramGrads: [...g.paramGrads()].map(([p, t]) => [p, t] as const),
  };
}
