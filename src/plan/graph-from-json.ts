// The training graph back from plan JSON, so a runtime needs nothing but the plan: tensors and ops are
// re-created in id order (an op when its first output's id comes up), and the result must serialize to the
// same JSON (graphToJson ∘ graphFromJson = id, checked by the tests on every sample).
import { SYMBOLIC_DIMS, type Dim, type SymbolName } from "../graph/dim.js";
import { Graph, type Phase, type TensorKind } from "../graph/graph.js";
import type { ParamSpec } from "../graph/op-def.js";
import type { AttrValue, DType, TensorType } from "../graph/types.js";
import type { PlanAttr, PlanGraph } from "./plan.js";
import { PlanError } from "./plan-error.js";

/** `768`, `B`, `4*B*S`, `S^2`: the inverse of dimToString. */
export function dimFromString(text: string): Dim {
  let coef = 1;
  const syms: Partial<Record<SymbolName, number>> = {};
  for (const part of text.split("*")) {
    if (/^\d+$/.test(part)) {
      coef *= Number(part);
      continue;
    }
    const m = /^([A-Z])(?:\^(\d+))?$/.exec(part);
    if (!m || !(SYMBOLIC_DIMS as readonly string[]).includes(m[1]!)) throw new PlanError("graph", `'${text}' is not a dimension`);
    const s = m[1] as SymbolName;
    syms[s] = (syms[s] ?? 0) + Number(m[2] ?? 1);
  }
  return { coef, syms };
}

function typeOf(t: PlanGraph["tensors"][number]): TensorType {
  return { dtype: t.dtype as DType, shape: t.shape.map(dimFromString) };
}

export function graphFromJson(model: string, j: PlanGraph): Graph {
  const g = new Graph(model);
  for (const l of j.layers) g.addLayer(l.name, { ...l.annotations });
  const paramOf = new Map(j.params.map((p) => [p.tensor, p]));
  const stateOf = new Map(j.states.map((s) => [s.tensor, s]));
  const producer = new Map<number, number>();
  j.ops.forEach((o, id) => o.outputs.forEach((t) => producer.set(t, id)));
  const attr = (v: PlanAttr): AttrValue => {
    if (typeof v !== "object") return v;
    if ("number" in v) return Number(v.number);
    if ("dim" in v) return dimFromString(v.dim);
    if ("shape" in v) return v.shape.map(dimFromString);
    const p = g.param(v.param);
    if (!p) throw new PlanError("graph", `an op refers to parameter '${v.param}' before it is defined`);
    return { kind: "ParamRef", name: v.param, type: p.type };
  };
  let nextOp = 0;
  j.tensors.forEach((t, id) => {
    const kind = t.kind as TensorKind;
    let made: number;
    if (kind === "input") made = g.addInput(t.name, typeOf(t));
    else if (kind === "param") {
      const p = paramOf.get(id)!;
      made = g.addParam({ name: p.name, type: typeOf(t), init: p.init as ParamSpec["init"], layer: p.layer, scope: p.scope, ...(p.split && { split: p.split }) });
    } else if (kind === "state") {
      const s = stateOf.get(id)!;
      made = g.addState({ name: s.name, type: typeOf(t), role: s.role as "momentum", ...(s.param !== undefined && { param: s.param }) });
    } else {
      const opId = producer.get(id);
      if (opId === undefined) throw new PlanError(`graph.tensors[${id}]`, `a ${kind} tensor that no op produces`);
      if (j.ops[opId]!.outputs[0] !== id) return; // created with the op's first output
      if (opId !== nextOp) throw new PlanError(`graph.ops[${opId}]`, `ops are not in creation order (expected op ${nextOp} next)`);
      const o = j.ops[opId]!;
      const outputs = g.addOp({
        op: o.op,
        attrs: Object.fromEntries(Object.entries(o.attrs).map(([k, v]) => [k, attr(v)])),
        inputs: o.inputs,
        outputTypes: o.outputs.map((x) => typeOf(j.tensors[x]!)),
        scope: o.scope,
        layer: o.layer,
        phase: o.phase as Phase,
        ...(o.forwardOp !== undefined && { forwardOp: o.forwardOp }),
        outputKind: kind as "activation" | "grad" | "update",
      });
      nextOp++;
      made = outputs[0]!;
    }
    if (made !== id) throw new PlanError(`graph.tensors[${id}]`, `tensors are not in creation order (re-created as ${made})`);
  });
  if (nextOp !== j.ops.length) throw new PlanError("graph.ops", `${j.ops.length - nextOp} ops produce no tensor`);
  for (const p of j.params) for (const a of p.aliases) g.aliasParam(a, p.name);
  g.setLoss(j.loss);
  for (const [p, t] of j.paramGrads) g.setParamGrad(p, t);
  for (const [a, b] of j.updates) g.setUpdate(a, b);
  return g;
}
