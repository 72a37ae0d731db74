// Structural invariants of a built graph, checked after the checker builds it and after every pass that
// rewrites it: a violation is a compiler bug, so the result is a list of plain messages, not diagnostics.
// Training graphs add the phase rules (graph.ts): phase order, gradient links, gradients, state, updates.
import { shapeEq, shapeToString } from "./dim.js";
import { isLeafKind, type Graph, type OpNode, type Phase, type TensorId } from "./graph.js";
import { inferOutputs, operandNames } from "./op-def.js";
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
  // Records are keyed by dense ids in plain and typed arrays, and an op's label is made only for a message:
  // a deep model's graph has hundreds of thousands of ops, and the checker verifies every graph it builds.
  // Which op each layer list claims, to cross-check against the op records (an array as a map: ids a broken
  // list may hold, negative or beyond the ops, are keys all the same).
  const listedIn: number[] = [];
  for (const l of layers) {
    for (const id of l.ops) {
      if (listedIn[id] !== undefined) out.push(`op ${id} is listed in layers ${listedIn[id]} and ${l.index}`);
      else listedIn[id] = l.index;
    }
  }

  // The op listing each tensor as an output: the first, and any more (a broken graph's).
  const firstProducer = new Int32Array(g.tensors().length).fill(-1);
  const moreProducers = new Map<TensorId, number[]>();
  // Forward ops run through the layers in order, gradient ops back through them: per phase, the layer of
  // the latest op so far (optimizer ops touch every layer's parameters in any order).
  let prevLayer = 0;
  const prevBackLayer = new Map<Phase, number>();
  let sawNonForward = false;
  ops.forEach((o, pos) => {
    if (o.id !== pos) out.push(`op at position ${pos} has id ${o.id}`);
    if (!(o.layer >= 0 && o.layer < layers.length)) out.push(`${label(o)}: layer ${o.layer} does not exist`);
    else if (o.phase === "forward") {
      if (o.layer < prevLayer) out.push(`${label(o)}: layer ${o.layer} comes after an op of layer ${prevLayer}`);
      prevLayer = Math.max(prevLayer, o.layer);
    } else if (o.phase === "backward" || o.phase === "weight_grad") {
      const prev = prevBackLayer.get(o.phase);
      if (prev !== undefined && o.layer > prev) out.push(`${label(o)}: ${o.phase} op of layer ${o.layer} comes after one of layer ${prev}`);
      prevBackLayer.set(o.phase, Math.min(prev ?? o.layer, o.layer));
    }
    if (listedIn[o.id] !== o.layer) {
      out.push(`${label(o)}: recorded in layer ${o.layer} but listed in ${listedIn[o.id] !== undefined ? `layer ${listedIn[o.id]}` : "no layer"}`);
    }
    if (o.phase === "forward" && sawNonForward) out.push(`${label(o)}: forward op after a gradient or optimizer op`);
    if (o.phase !== "forward") sawNonForward = true;
    checkPhaseLinks(g, o, out);

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
      if (firstProducer[t] === -1) firstProducer[t] = o.id;
      else {
        const more = moreProducers.get(t);
        if (more) more.push(o.id);
        else moreProducers.set(t, [o.id]);
      }
    }
    if (operandsOk) checkAgainstRegistry(g, o, out);
  });

  const listing = (t: TensorId): number => firstProducer[t] ?? -1;
  const producedBy = (t: TensorId): number[] => (listing(t) === -1 ? [] : [listing(t), ...(moreProducers.get(t) ?? [])]);
  for (const t of g.tensors()) {
    const first = listing(t.id);
    if (isLeafKind(t.kind)) {
      if (first !== -1) out.push(`${t.kind} ${t.name} (%${t.id}) is listed as an output of op ${producedBy(t.id).join(", ")}`);
    } else if (first === -1 || moreProducers.has(t.id) || first !== t.producer) {
      const listed = first === -1 ? "no op lists it as an output" : `listed as an output of op ${producedBy(t.id).join(", ")}`;
      out.push(`${t.kind} %${t.id} records producer op ${t.producer}, but ${listed}`);
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

  checkTrainingRecords(g, paramNames, out);

  const loss = g.loss;
  if (loss === undefined) out.push("the loss is not set");
  else if (!g.hasTensor(loss)) out.push(`the loss %${loss} does not exist`);
  else {
    const t = g.tensor(loss).type;
    if (t.dtype !== "f32" || t.shape.length !== 0) out.push(`the loss %${loss} must be an f32 scalar, got ${typeToString(t)}`);
  }
  return out;
}

/** `op 12 (linear in layers.0.fc)`: what a message says of an op. */
function label(o: OpNode): string {
  return `op ${o.id} (${o.op}${o.scope ? ` in ${o.scope}` : ""})`;
}

/** Re-derives the op's parameters and output type from the registry and compares with what was recorded. */
function checkAgainstRegistry(g: Graph, o: OpNode, out: string[]): void {
  const def = getOp(o.op);
  if (!def) {
    out.push(`${label(o)}: '${o.op}' is not a registered op`);
    return;
  }
  try {
    const bad = def.validate?.(o.attrs);
    if (bad) {
      out.push(`${label(o)}: attributes rejected: ${bad.message}`);
      return;
    }
    const specs = def.params?.(o.attrs) ?? [];
    const nData = operandNames(def, o.attrs).length;
    if (o.inputs.length !== nData + specs.length) {
      out.push(`${label(o)}: expects ${nData} tensor operand(s) and ${specs.length} parameter(s), got ${o.inputs.length} operands`);
      return;
    }
    specs.forEach((s, i) => {
      const t = g.tensor(o.inputs[nData + i]!);
      // Under sequence parallelism a norm reads its replicated weights through tp_copy (their gradients,
      // one part of the sequence per rank, all-reduced over the group): still a parameter's value.
      const viaCopy = t.producer !== undefined && g.op(t.producer).op === "tp_copy" && g.tensor(g.op(t.producer).inputs[0]!).kind === "param";
      if (t.kind !== "param" && !viaCopy) out.push(`${label(o)}: operand for parameter '${s.name}' is ${t.kind} %${t.id}, not a parameter`);
      else if (!shapeEq(t.type.shape, s.shape)) {
        out.push(`${label(o)}: parameter '${s.name}' should have shape ${shapeToString(s.shape)}, got ${t.name} ${typeToString(t.type)}`);
      }
    });
    const got = inferOutputs(def, o.inputs.slice(0, nData).map((t) => g.tensor(t).type), o.attrs);
    if (!Array.isArray(got)) out.push(`${label(o)}: re-inference fails: ${(got as { message: string }).message}`);
    else if (o.outputs.length !== got.length) out.push(`${label(o)}: has ${o.outputs.length} outputs, expected ${got.length}`);
    else {
      o.outputs.forEach((t, i) => {
        if (!g.hasTensor(t)) return;
        const rec = g.tensor(t).type;
        if (!typeEq(rec, got[i]!)) out.push(`${label(o)}: output recorded as ${typeToString(rec)} but infers ${typeToString(got[i]!)}`);
      });
    }
  } catch (e) {
    out.push(`${label(o)}: registry rules threw: ${(e as Error).message}`);
  }
}

const PHASE_RANK: Record<Phase, number> = { forward: 0, backward: 1, weight_grad: 2, optimizer: 3 };

/**
 * Phase rules of one op: gradient ops link to an earlier forward op and forward ops link to none; no op
 * reads a value of a later phase (forward reads no gradient; an input-gradient op reads no weight gradient,
 * which zero-bubble schedules may not have computed yet; only optimizer ops read optimizer values).
 */
function checkPhaseLinks(g: Graph, o: OpNode, out: string[]): void {
  const grad = o.phase === "backward" || o.phase === "weight_grad";
  if (grad) {
    const f = o.forwardOp;
    if (f === undefined) out.push(`${label(o)}: ${o.phase} op has no forward op`);
    else if (!(f >= 0 && f < o.id) || g.op(f).phase !== "forward") out.push(`${label(o)}: links to op ${f}, which is not an earlier forward op`);
  } else if (o.forwardOp !== undefined) out.push(`${label(o)}: ${o.phase} op links to a forward op`);
  o.inputs.forEach((t, slot) => {
    const p = g.hasTensor(t) ? g.tensor(t).producer : undefined;
    if (p === undefined || !(p >= 0 && p < g.ops().length)) return;
    const from = g.op(p).phase;
    if (PHASE_RANK[from] > PHASE_RANK[o.phase]) out.push(`${label(o)}: ${o.phase} op reads operand ${slot} %${t}, a ${from} value`);
  });
}

/** Gradients, optimizer state and updates (all empty for a forward graph). */
function checkTrainingRecords(g: Graph, paramNames: ReadonlySet<string>, out: string[]): void {
  for (const [name, t] of g.paramGrads()) {
    const p = g.param(name);
    if (!p || !paramNames.has(name)) out.push(`gradient of unknown parameter ${name}`);
    else if (!g.hasTensor(t) || g.tensor(t).kind !== "grad") out.push(`gradient of ${name}: %${t} is not a grad tensor`);
    else if (!typeEq(g.tensor(t).type, p.type)) out.push(`gradient of ${name} is ${typeToString(g.tensor(t).type)}, the parameter ${typeToString(p.type)}`);
  }
  for (const s of g.states()) {
    if (!g.hasTensor(s.tensor) || g.tensor(s.tensor).kind !== "state") out.push(`state ${s.name}: %${s.tensor} is not a state tensor`);
    if (s.param !== undefined && !paramNames.has(s.param)) out.push(`state ${s.name} belongs to unknown parameter ${s.param}`);
  }
  const updated = new Set<TensorId>();
  for (const [target, value] of g.updates()) {
    if (!g.hasTensor(target) || !g.hasTensor(value)) {
      out.push(`update %${target} ← %${value} names a tensor that does not exist`);
      continue;
    }
    const [tt, vt] = [g.tensor(target), g.tensor(value)];
    updated.add(value);
    if (tt.kind !== "param" && tt.kind !== "state") out.push(`update target ${tt.name} (%${target}) is a ${tt.kind}`);
    if (vt.kind !== "update" || vt.producer === undefined) {
      out.push(`update value %${value} of ${tt.name} is not the output of an update op`);
      continue;
    }
    if (!typeEq(tt.type, vt.type)) out.push(`update of ${tt.name}: ${typeToString(vt.type)} replaces ${typeToString(tt.type)}`);
    // In place: once the new value is written into the leaf's buffer, nothing may read the old value.
    const late = g.consumers(target).filter((c) => c > vt.producer!);
    if (late.length > 0) out.push(`${tt.name} is read by op ${late.join(", ")} after op ${vt.producer} updates it`);
  }
  for (const t of g.tensors()) {
    if (t.kind === "update" && !updated.has(t.id)) out.push(`update tensor %${t.id} replaces no parameter or state`);
  }
}
