// Kinds of layer: layers whose forward ops are the same ops with the same attributes on operands of the same
// types, in the same order. A deep model is mostly a few kinds repeated (gpt-tiny at 5,000 blocks: 5,004
// layers, 5 kinds), and whatever depends only on a layer's forward ops (an op's cost estimate is a function of
// its op, attributes and operand types) is found once per kind. Found once per graph (per-graph.ts): the plan search
// and compile's stage costs both ask.
import type { Graph, OpId } from "./graph.js";
import { perGraph } from "./per-graph.js";

export interface LayerKinds {
  /** Per layer: its kind, numbered in order of first appearance. */
  readonly kindOf: readonly number[];
  /** Per kind: the first layer of that kind. */
  readonly representative: readonly number[];
  /** Per layer: its forward ops, in op order (a kind's layers have them position by position alike). */
  readonly forwardOps: readonly (readonly OpId[])[];
}

export const layerKinds = perGraph(findLayerKinds);

function findLayerKinds(g: Graph): LayerKinds {
  const layers = g.layers();
  const forwardOps = layers.map(() => [] as OpId[]);
  for (const o of g.ops()) if (o.phase === "forward") forwardOps[o.layer]!.push(o.id);
  // Layers are compared with the kinds found so far whose ops have the same names in the same order (a
  // bucket: usually one kind), field by field: cheaper than writing each op's attributes and operand types
  // out as text to look up (a deep model's operand types are distinct objects, 80,000 at 5,000 blocks).
  const buckets = new Map<string, number[]>();
  const representative: number[] = [];
  const kindOf = layers.map((l) => {
    const ops = forwardOps[l.index]!;
    const names = ops.map((id) => g.op(id).op).join(" ");
    let bucket = buckets.get(names);
    if (bucket === undefined) buckets.set(names, (bucket = []));
    for (const k of bucket) if (sameOps(g, ops, forwardOps[representative[k]!]!)) return k;
    const k = representative.length;
    representative.push(l.index);
    bucket.push(k);
    return k;
  });
  return { kindOf, representative, forwardOps };
}

/** Whether two lists of ops (with the same names) have the same attributes and operand types, in order. */
function sameOps(g: Graph, a: readonly OpId[], b: readonly OpId[]): boolean {
  for (let i = 0; i < a.length; i++) {
    const x = g.op(a[i]!);
    const y = g.op(b[i]!);
    if (x.inputs.length !== y.inputs.length || !samePlain(x.attrs, y.attrs)) return false;
    for (let n = 0; n < x.inputs.length; n++) {
      const s = g.tensor(x.inputs[n]!).type;
      const t = g.tensor(y.inputs[n]!).type;
      if (s !== t && !samePlain(s, t)) return false;
    }
  }
  return true;
}

/** Equality of plain data (attributes, tensor types: numbers, strings, booleans, arrays, records). Not
 *  node:util's isDeepStrictEqual, which also compares prototypes and property descriptors: comparing the
 *  attributes and operand types of gpt-tiny's 40,000 neighbouring forward ops at 5,000 blocks took 61–79 ms
 *  with it, 29–68 with this (three rounds, in turn, in one process). */
function samePlain(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!samePlain(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    if (!Object.hasOwn(b, k) || !samePlain((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}
