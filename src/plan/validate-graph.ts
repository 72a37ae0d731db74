// Load-time checks of a plan's training graph: every field typed, every tensor, op and layer reference in range.
import { DTYPES } from "../graph/types.js";
import { PHASES } from "../graph/graph.js";
import { array, arrayOf, boolean, everyOf, fail, field, ids, integer, isInteger, key, number, object, oneOf, string, tuple, type Json } from "./json-check.js";

const TENSOR_KINDS = ["input", "param", "state", "activation", "grad", "update"] as const;
const STATE_ROLES = ["momentum", "exp_avg", "exp_avg_sq", "step"] as const;
const INITS = ["normal", "zeros", "ones", "uniform_fan_in"] as const;
/** The text form dimToString writes: `768`, `B`, `B*S`, `4*S^2` (a coefficient only when ≠ 1 or alone). */
function isDimText(s: string): boolean {
  const parts = s.split("*");
  let i = 0;
  const coef = /^(?:0|[1-9][0-9]*)$/.test(parts[0]!);
  if (coef) i = 1;
  if (coef && parts.length === 1) return true;
  if (coef && parts[0] === "1") return false;
  let last = -1;
  for (; i < parts.length; i++) {
    const m = /^([BS])(?:\^([2-9]|[1-9][0-9]+))?$/.exec(parts[i]!);
    if (!m) return false;
    const order = m[1] === "B" ? 0 : 1;
    if (order <= last) return false;
    last = order;
  }
  return last >= 0;
}

function dimText(v: Json, path: string): string {
  const s = string(v, path);
  if (!isDimText(s)) fail(path, `${JSON.stringify(s)} is not a dimension (expected e.g. 768, B, B*S)`);
  return s;
}

function attr(v: Json, path: string): void {
  if (typeof v === "string" || typeof v === "boolean") return;
  if (typeof v === "number") return void number(v, path);
  const o = object(v, path);
  const keys = Object.keys(o);
  if (keys.length !== 1) fail(path, `expected a number, string, boolean or one of {dim}, {shape}, {param}, {number}`);
  const k = keys[0]!;
  if (k === "dim") dimText(o.dim, key(path, "dim"));
  else if (k === "shape") arrayOf(o.shape, key(path, "shape"), dimText);
  else if (k === "param") string(o.param, key(path, "param"));
  else if (k === "number") oneOf(o.number, key(path, "number"), ["Infinity", "-Infinity", "NaN"]);
  else fail(key(path, k), `unknown attribute encoding '${k}'`);
}

/** The quick tests of the graph's long arrays (json-check's everyOf): each passes only what the checks with
 *  paths below accept, member for member. */
class Quick {
  /** Dimension texts already found well formed: a model's tensors share a few dozen. */
  private readonly dims = new Set<string>();

  tensor = (t: Json): boolean => {
    const o = plainObject(t);
    return o !== undefined && has(o, "name") && typeof o.name === "string" && has(o, "dtype") && isOneOf(o.dtype, DTYPES) && has(o, "shape") && this.shape(o.shape) && has(o, "kind") && isOneOf(o.kind, TENSOR_KINDS);
  };

  /** The op test, for a graph of these counts. */
  op = (tensorCount: number, layerCount: number, opCount: number) => (op: Json, i: number): boolean => {
    const o = plainObject(op);
    if (o === undefined || !(has(o, "op") && typeof o.op === "string" && has(o, "attrs") && has(o, "inputs") && has(o, "outputs") && has(o, "phase") && has(o, "layer") && has(o, "scope"))) return false;
    const attrs = plainObject(o.attrs);
    if (attrs === undefined || !Object.values(attrs).every(this.attr)) return false;
    return (
      tensorIds(o.inputs, tensorCount) &&
      tensorIds(o.outputs, tensorCount) &&
      isOneOf(o.phase, PHASES) &&
      isInteger(o.layer, 0, layerCount) &&
      typeof o.scope === "string" &&
      (o.forwardOp === undefined || isInteger(o.forwardOp, 0, Math.min(i, opCount)))
    );
  };

  /** A name and a tensor id below `tensorCount`: what params and states both start with. */
  private namedTensor = (o: Record<string, Json>, tensorCount: number): boolean =>
    has(o, "name") && typeof o.name === "string" && has(o, "tensor") && isInteger(o.tensor, 0, tensorCount);

  /** The param test (a split parameter is left to the checks with paths). */
  param = (tensorCount: number, layerCount: number) => (x: Json): boolean => {
    const o = plainObject(x);
    return (
      o !== undefined &&
      this.namedTensor(o, tensorCount) &&
      has(o, "layer") &&
      isInteger(o.layer, 0, layerCount) &&
      has(o, "scope") &&
      typeof o.scope === "string" &&
      has(o, "init") &&
      isOneOf(o.init, INITS) &&
      has(o, "aliases") &&
      Array.isArray(o.aliases) &&
      o.aliases.every((a) => typeof a === "string") &&
      o.split === undefined
    );
  };

  state = (tensorCount: number) => (x: Json): boolean => {
    const o = plainObject(x);
    return (
      o !== undefined &&
      this.namedTensor(o, tensorCount) &&
      has(o, "role") &&
      isOneOf(o.role, STATE_ROLES) &&
      (o.param === undefined || typeof o.param === "string")
    );
  };

  /** `[a, b]` pairs: updates (two tensor ids) and paramGrads (a name and a tensor id). */
  pair = (first: (v: Json) => boolean, tensorCount: number) => (x: Json): boolean => Array.isArray(x) && x.length === 2 && first(x[0]) && isInteger(x[1], 0, tensorCount);

  private attr = (v: Json): boolean => {
    if (typeof v === "string" || typeof v === "boolean") return true;
    if (typeof v === "number") return Number.isFinite(v);
    const o = plainObject(v);
    if (o === undefined) return false;
    const keys = Object.keys(o);
    if (keys.length !== 1) return false;
    if (keys[0] === "dim") return this.dim(o.dim);
    if (keys[0] === "shape") return this.shape(o.shape);
    if (keys[0] === "param") return typeof o.param === "string";
    return keys[0] === "number" && isOneOf(o.number, ["Infinity", "-Infinity", "NaN"]);
  };

  private shape(v: Json): boolean {
    return Array.isArray(v) && v.every((d) => this.dim(d));
  }

  private dim(v: Json): boolean {
    if (typeof v !== "string") return false;
    if (this.dims.has(v)) return true;
    if (!isDimText(v)) return false;
    this.dims.add(v);
    return true;
  }
}

const plainObject = (v: Json): Record<string, Json> | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, Json>) : undefined);
const tensorIds = (v: Json, count: number): boolean => Array.isArray(v) && v.every((x) => isInteger(x, 0, count));
const has = (o: Record<string, Json>, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
const isOneOf = (v: Json, values: readonly string[]): boolean => typeof v === "string" && values.includes(v);

/** Returns the layer count, which later sections check their layer references against. */
export function checkGraph(v: Json, path: string): { layers: number; tensors: number } {
  const g = object(v, path);
  const tensorsPath = key(path, "tensors");
  const tensorCount = array(field(g, "tensors", path), tensorsPath).length;
  const quick = new Quick();
  everyOf(g.tensors, tensorsPath, quick.tensor, (t, p) => {
    const o = object(t, p);
    string(field(o, "name", p), key(p, "name"));
    oneOf(field(o, "dtype", p), key(p, "dtype"), DTYPES);
    arrayOf(field(o, "shape", p), key(p, "shape"), dimText);
    oneOf(field(o, "kind", p), key(p, "kind"), TENSOR_KINDS);
  });
  const tensorId = (x: Json, p: string) => integer(x, p, 0, tensorCount, "a tensor id");
  const layersPath = key(path, "layers");
  const layerCount = array(field(g, "layers", path), layersPath).length;
  arrayOf(g.layers, layersPath, (l, p) => {
    const o = object(l, p);
    string(field(o, "name", p), key(p, "name"));
    arrayOf(field(o, "params", p), key(p, "params"), string);
    const a = object(field(o, "annotations", p), key(p, "annotations"));
    if (a.stage !== undefined) integer(a.stage, key(key(p, "annotations"), "stage"));
    if (a.checkpoint !== undefined) boolean(a.checkpoint, key(key(p, "annotations"), "checkpoint"));
    if (a.fsdpUnit !== undefined) boolean(a.fsdpUnit, key(key(p, "annotations"), "fsdpUnit"));
  });
  const opsPath = key(path, "ops");
  const opCount = array(field(g, "ops", path), opsPath).length;
  everyOf(g.ops, opsPath, quick.op(tensorCount, layerCount, opCount), (op, p, i) => {
    const o = object(op, p);
    string(field(o, "op", p), key(p, "op"));
    const attrs = object(field(o, "attrs", p), key(p, "attrs"));
    for (const [k, a] of Object.entries(attrs)) attr(a, key(key(p, "attrs"), k));
    arrayOf(field(o, "inputs", p), key(p, "inputs"), tensorId);
    arrayOf(field(o, "outputs", p), key(p, "outputs"), tensorId);
    oneOf(field(o, "phase", p), key(p, "phase"), PHASES);
    integer(field(o, "layer", p), key(p, "layer"), 0, layerCount, "a layer index");
    string(field(o, "scope", p), key(p, "scope"));
    if (o.forwardOp !== undefined) integer(o.forwardOp, key(p, "forwardOp"), 0, Math.min(i, opCount), "an earlier op id");
  });
  everyOf(field(g, "params", path), key(path, "params"), quick.param(tensorCount, layerCount), (x, p) => {
    const o = object(x, p);
    string(field(o, "name", p), key(p, "name"));
    tensorId(field(o, "tensor", p), key(p, "tensor"));
    integer(field(o, "layer", p), key(p, "layer"), 0, layerCount, "a layer index");
    string(field(o, "scope", p), key(p, "scope"));
    oneOf(field(o, "init", p), key(p, "init"), INITS);
    arrayOf(field(o, "aliases", p), key(p, "aliases"), string);
    if (o.split !== undefined) {
      const s = object(o.split, key(p, "split"));
      integer(field(s, "axis", key(p, "split")), key(key(p, "split"), "axis"), 0, 8, "a dimension index");
      const parts = integer(field(s, "parts", key(p, "split")), key(key(p, "split"), "parts"), 2, Infinity, "an integer ≥ 2");
      arrayOf(field(s, "blocks", key(p, "split")), key(key(p, "split"), "blocks"), (b, q) => {
        const n = integer(b, q, 1, Infinity, "a positive integer");
        if (n % parts !== 0) fail(q, `a block of ${n} does not split into ${parts} parts`);
        return n;
      });
    }
  });
  everyOf(field(g, "states", path), key(path, "states"), quick.state(tensorCount), (x, p) => {
    const o = object(x, p);
    string(field(o, "name", p), key(p, "name"));
    tensorId(field(o, "tensor", p), key(p, "tensor"));
    oneOf(field(o, "role", p), key(p, "role"), STATE_ROLES);
    if (o.param !== undefined) string(o.param, key(p, "param"));
  });
  everyOf(field(g, "updates", path), key(path, "updates"), quick.pair((v) => isInteger(v, 0, tensorCount), tensorCount), (x, p) => {
    const [a, b] = tuple(x, p, 2);
    tensorId(a, `${p}[0]`);
    tensorId(b, `${p}[1]`);
  });
  everyOf(field(g, "paramGrads", path), key(path, "paramGrads"), quick.pair((v) => typeof v === "string", tensorCount), (x, p) => {
    const [name, t] = tuple(x, p, 2);
    string(name, `${p}[0]`);
    tensorId(t, `${p}[1]`);
  });
  ids(field(g, "inputs", path), key(path, "inputs"), tensorCount, "a tensor id");
  tensorId(field(g, "loss", path), key(path, "loss"));
  return { layers: layerCount, tensors: tensorCount };
}
