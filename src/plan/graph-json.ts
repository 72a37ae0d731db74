// The training graph as plan JSON: every op, tensor, parameter, state, update and gradient, by id.
import { dimToString, type Dim, type Shape } from "../graph/dim.js";
import type { Graph } from "../graph/graph.js";
import type { Attrs, AttrValue, TensorType } from "../graph/types.js";
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

/** An op's attributes as the plan writes them: the same object when every value is already JSON (numbers that
 *  are finite, booleans, strings: most ops', and the optimizer's per-parameter ops share one), else a copy
 *  with dimensions, shapes and parameter references written out. A plan is read-only, so sharing is safe. */
function planAttrs(a: Attrs): Readonly<Record<string, PlanAttr>> {
  for (const k in a) {
    const v = a[k]!;
    if (typeof v === "object" || (typeof v === "number" && !Number.isFinite(v))) {
      const attrs: Record<string, PlanAttr> = {};
      for (const key in a) attrs[key] = attrToJson(a[key]!);
      return attrs;
    }
  }
  return a as Readonly<Record<string, number | boolean | string>>;
}

export function graphToJson(g: Graph): PlanGraph {
  if (g.loss === undefined) throw new Error(`internal: graph '${g.model}' has no loss`);
  // A deep model has hundreds of thousands of ops: their attributes are read key by key (Object.entries' order,
  // without its arrays), half the time of entries and spreads, and their tensor lists are shared, not copied
  // (the graph never changes an op's lists in place, and a plan is read-only: gpt-tiny at 5,000 layers, this
  // list of ops took 0.24–0.29 s with copies, 0.08–0.13 s without).
  // One list per distinct shape, shared by the tensors of that shape, each dimension written once: a deep
  // model's training graph has far more tensors than shape lists, and those than dimensions (gpt-tiny at
  // 5,000 blocks: 570k tensors, 160k shape lists, 90k dimensions, a few hundred distinct shapes).
  const byShape = new Map<Shape, readonly string[]>();
  const byDim = new Map<Dim, string>();
  const byText = new Map<string, readonly string[]>();
  const dimText = (d: Dim): string => {
    let s = byDim.get(d);
    if (s === undefined) byDim.set(d, (s = dimToString(d)));
    return s;
  };
  const shapeText = (t: TensorType): readonly string[] => {
    let s = byShape.get(t.shape);
    if (s === undefined) {
      const dims = t.shape.map(dimText);
      const key = dims.join(",");
      s = byText.get(key);
      if (s === undefined) byText.set(key, (s = dims));
      byShape.set(t.shape, s);
    }
    return s;
  };
  const ops = g.ops().map((o): PlanOp => {
    const attrs = planAttrs(o.attrs);
    const op: { -readonly [K in keyof PlanOp]: PlanOp[K] } = { op: o.op, attrs, inputs: o.inputs, outputs: o.outputs, phase: o.phase, layer: o.layer, scope: o.scope };
    if (o.forwardOp !== undefined) op.forwardOp = o.forwardOp;
    return op;
  });
  return {
    inputs: [...g.inputs()],
    loss: g.loss,
    tensors: g.tensors().map((t) => ({ name: t.name, dtype: t.type.dtype, shape: shapeText(t.type), kind: t.kind })),
    ops,
    layers: g.layers().map((l) => ({ name: l.name, params: [...l.params], annotations: { ...l.annotations } })),
    params: g.params().map((p) => ({ name: p.name, tensor: p.tensor, layer: p.layer, scope: p.scope, init: p.init, aliases: [...p.aliases], ...(p.split && { split: { axis: p.split.axis, parts: p.split.parts, blocks: [...p.split.blocks] } }) })),
    states: g.states().map((s) => (s.param === undefined ? { name: s.name, tensor: s.tensor, role: s.role } : { name: s.name, tensor: s.tensor, role: s.role, param: s.param })),
    updates: [...g.updates()].map(([a, b]) => [a, b] as const),
    paramGrads: [...g.paramGrads()].map(([p, t]) => [p, t] as const),
  };
}
