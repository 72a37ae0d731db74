// Structural invariants of a built graph, checked after the checker builds it and after every pass that
// rewrites it: a violation is a compiler bug, so the result is a list of plain messages, not diagnostics.
import { shapeEq, shapeToString } from "./dim.js";
import type { Graph, OpNode, TensorId } from "./graph.js";
import { isOpCheckError } from "./op-def.js";
import { getOp } from "./registry.js";
import type { TensorType } from "./types.js";
import { typeToString } from "./types-format.js";

function typeEq(a: TensorType, b: TensorType): boolean {
  return a.dtype === b.dtype && shapeEq(a.shape, b.shape);
}

/** Every broken invariant, one message each; empty when the graph is sound. */
export function verifyGraph(g: Graph): string[] {
  const out: string[] = [];
  const layers = g.layers();
  const ops = g.ops();
  const label = (o: OpNode): string => `op ${o.id} (${o.op}${o.scope ? ` in ${o.scope}` : ""})`;

  // Which op each layer list claims, to cross-check against the op records.
  const listedIn = new Map<number, number>();
  for (const l of layers) {
    for (const id of l.ops) {
      if (listedIn.has(id)) out.push(`op ${id} is listed in layers ${listedIn.get(id)} and ${l.index}`);
      else listedIn.set(id, l.index);
    }
  }

  const producedBy = new Map<TensorId, number[]>();
  let prevLayer = 0;
  ops.forEach((o, pos) => {
    if (o.id !== pos) out.push(`op at position ${pos} has id ${o.id}`);
    if (!(o.layer >= 0 && o.layer < layers.length)) out.push(`${label(o)}: layer ${o.layer} does not exist`);
    else if (o.layer < prevLayer) out.push(`${label(o)}: layer ${o.layer} comes after an op of layer ${prevLayer}`);
    if (listedIn.get(o.id) !== o.layer) {
      out.push(`${label(o)}: recorded in layer ${o.layer} but listed in ${listedIn.has(o.id) ? `layer ${listedIn.get(o.id)}` : "no layer"}`);
    }
    prevLayer = Math.max(prevLayer, o.layer);

    let operandsOk = true;
    o.inputs.forEach((t, slot) => {
      if (!g.hasTensor(t)) {
        out.push(`${label(o)}: operand ${slot} is tensor %${t}, which does not exist`);
        operandsOk = false;
        return;
      }
      const p = g.tensor(t).producer;
      if (p !== undefined && !(p < o.id)) {
        out.push(`${label(o)}: operand ${slot} is %${t}, produced by op ${p}, which does not come earlier`);
      }
    });
    for (const t of o.outputs) {
      if (!g.hasTensor(t)) {
        out.push(`${label(o)}: output %${t} does not exist`);
        continue;
      }
      const list = producedBy.get(t);
      if (list) list.push(o.id);
      else producedBy.set(t, [o.id]);
    }
    if (operandsOk) checkAgainstRegistry(g, o, label(o), out);
  });

  for (const t of g.tensors()) {
    const by = producedBy.get(t.id) ?? [];
    if (t.kind !== "activation") {
      if (by.length > 0) out.push(`${t.kind} ${t.name} (%${t.id}) is listed as an output of op ${by.join(", ")}`);
    } else if (by.length !== 1 || by[0] !== t.producer) {
      const listed = by.length === 0 ? "no op lists it as an output" : `listed as an output of op ${by.join(", ")}`;
      out.push(`activation %${t.id} records producer op ${t.producer}, but ${listed}`);
    }
  }

  if (!g.isAcyclic()) {
    const cycles = g.findCycles();
    for (const c of cycles) out.push(`graph has a cycle through ops ${c.join(", ")}`);
    if (cycles.length === 0) out.push("graph has a cycle");
  }

  const paramNames = new Set<string>();
  for (const p of g.params()) {
    paramNames.add(p.name);
    const l = layers[p.layer];
    if (!l) out.push(`parameter ${p.name}: layer ${p.layer} does not exist`);
    else if (!l.params.includes(p.name)) out.push(`parameter ${p.name}: recorded in layer ${p.layer} but not in its list`);
    const t = g.hasTensor(p.tensor) ? g.tensor(p.tensor) : undefined;
    if (!t || t.kind !== "param") out.push(`parameter ${p.name}: %${p.tensor} is not a parameter tensor`);
  }
  for (const l of layers) {
    for (const name of l.params) if (!paramNames.has(name)) out.push(`layer ${l.index} lists unknown parameter ${name}`);
  }
  for (const [alias, target] of g.aliases()) {
    if (!paramNames.has(target)) out.push(`alias ${alias} points to unknown parameter ${target}`);
  }

  const loss = g.loss;
  if (loss === undefined) out.push("the loss is not set");
  else if (!g.hasTensor(loss)) out.push(`the loss %${loss} does not exist`);
  else {
    const t = g.tensor(loss).type;
    if (t.dtype !== "f32" || t.shape.length !== 0) out.push(`the loss %${loss} must be an f32 scalar, got ${typeToString(t)}`);
  }
  return out;
}

/** Re-derives the op's parameters and output type from the registry and compares with what was recorded. */
function checkAgainstRegistry(g: Graph, o: OpNode, label: string, out: string[]): void {
  const def = getOp(o.op);
  if (!def) {
    out.push(`${label}: '${o.op}' is not a registered op`);
    return;
  }
  try {
    const bad = def.validate?.(o.attrs);
    if (bad) {
      out.push(`${label}: attributes rejected: ${bad.message}`);
      return;
    }
    const specs = def.params?.(o.attrs) ?? [];
    const nData = def.inputs.length;
    if (o.inputs.length !== nData + specs.length) {
      out.push(`${label}: expects ${nData} tensor operand(s) and ${specs.length} parameter(s), got ${o.inputs.length} operands`);
      return;
    }
    specs.forEach((s, i) => {
      const t = g.tensor(o.inputs[nData + i]!);
      if (t.kind !== "param") out.push(`${label}: operand for parameter '${s.name}' is ${t.kind} %${t.id}, not a parameter`);
      else if (!shapeEq(t.type.shape, s.shape)) {
        out.push(`${label}: parameter '${s.name}' should have shape ${shapeToString(s.shape)}, got ${t.name} ${typeToString(t.type)}`);
      }
    });
    const got = def.infer(o.inputs.slice(0, nData).map((t) => g.tensor(t).type), o.attrs);
    if (isOpCheckError(got)) out.push(`${label}: re-inference fails: ${got.message}`);
    else if (o.outputs.length !== 1) out.push(`${label}: has ${o.outputs.length} outputs, expected 1`);
    else if (g.hasTensor(o.outputs[0]!)) {
      const rec = g.tensor(o.outputs[0]!).type;
      if (!typeEq(rec, got)) out.push(`${label}: output recorded as ${typeToString(rec)} but infers ${typeToString(got)}`);
    }
  } catch (e) {
    out.push(`${label}: registry rules threw: ${(e as Error).message}`);
  }
}
