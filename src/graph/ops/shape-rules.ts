// Rules shared by the op entries: attribute access with defaults, the arity/default wrapper every op goes
// through, dtype, rank and last-dimension checks, and numpy-style broadcasting over symbolic dims.
import { dim, dimEq, dimToString, isConcrete, type Dim, type Shape } from "../dim.js";
import type { AttrSpec, OpCheckError, OpDef } from "../op-def.js";
import { isFloatDType, type Attrs, type AttrValue, type DType, type ParamRef, type TensorType } from "../types.js";
import { typeToString } from "../types-format.js";

export function opError(code: OpCheckError["code"], message: string): OpCheckError {
  return { code, message };
}

/** The first failed check, so an op reports one problem at a time. */
export function firstError(...checks: readonly (OpCheckError | undefined)[]): OpCheckError | undefined {
  return checks.find((c) => c !== undefined);
}

// ---- attributes ------------------------------------------------------------------------------------------

/** Fills in declared defaults for attributes the caller left out; `optional` ones stay absent. */
export function withDefaults(specs: readonly AttrSpec[], attrs: Attrs): Attrs {
  let out: Record<string, AttrValue> | undefined;
  for (const s of specs) {
    if (s.default !== undefined && attrs[s.name] === undefined) {
      out ??= { ...attrs };
      out[s.name] = s.default;
    }
  }
  return out ?? attrs;
}

// The checker binds and type-checks attributes before calling an op, so a missing or mistyped one here is a
// compiler bug, not a user error: these accessors throw instead of returning a diagnostic.
function missing(name: string, want: string): never {
  throw new Error(`internal: attribute '${name}' must be ${want}`);
}

export function num(attrs: Attrs, name: string): number {
  const v = attrs[name];
  return typeof v === "number" ? v : missing(name, "a number");
}

export function optNum(attrs: Attrs, name: string): number | undefined {
  return attrs[name] === undefined ? undefined : num(attrs, name);
}

export function bool(attrs: Attrs, name: string): boolean {
  const v = attrs[name];
  return typeof v === "boolean" ? v : missing(name, "a bool");
}

/** A `dim` attribute; a concrete integer may arrive as a plain number. */
export function dimAttr(attrs: Attrs, name: string): Dim {
  const v = attrs[name];
  if (typeof v === "number") return dim(v);
  if (typeof v === "object" && !Array.isArray(v) && (v as Dim).coef !== undefined) return v as Dim;
  return missing(name, "a dimension");
}

/** A `shape` attribute; entries may be plain numbers for concrete dims. */
export function shapeAttr(attrs: Attrs, name: string): Shape {
  const v = attrs[name];
  if (!Array.isArray(v)) return missing(name, "a shape");
  return (v as readonly (Dim | number)[]).map((d) => (typeof d === "number" ? dim(d) : d));
}

export function paramAttr(attrs: Attrs, name: string): ParamRef | undefined {
  const v = attrs[name];
  if (v === undefined) return undefined;
  if (typeof v === "object" && !Array.isArray(v) && (v as ParamRef).kind === "ParamRef") return v as ParamRef;
  return missing(name, "a parameter reference");
}

/** FSM409 unless every named integer attribute is ≥ 1 (sizes, counts). */
export function requirePositive(op: string, attrs: Attrs, names: readonly string[]): OpCheckError | undefined {
  for (const n of names) {
    const v = optNum(attrs, n);
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) {
      return opError("FSM409", `${op}: '${n}' must be a positive integer, got ${v}`);
    }
  }
  return undefined;
}

// ---- the wrapper -----------------------------------------------------------------------------------------

/**
 * Registers an op entry: validate/params/infer always see declared defaults filled in, and infer rejects a
 * wrong number of tensor operands, so each entry states only its own rule.
 */
export function defineOp(def: OpDef): OpDef {
  const { validate, params, infer } = def;
  const full = (attrs: Attrs): Attrs => withDefaults(def.attrs, attrs);
  return {
    ...def,
    ...(validate && { validate: (attrs: Attrs) => validate(full(attrs)) }),
    ...(params && { params: (attrs: Attrs) => params(full(attrs)) }),
    infer(inputs: readonly TensorType[], attrs: Attrs) {
      if (inputs.length !== def.inputs.length) {
        const n = def.inputs.length;
        return opError("FSM401", `${def.name} takes ${n} tensor operand${n === 1 ? "" : "s"}, got ${inputs.length}`);
      }
      return infer(inputs, full(attrs));
    },
  };
}

// ---- dtype and rank --------------------------------------------------------------------------------------

export function requireFloat(op: string, t: TensorType, role = "input"): OpCheckError | undefined {
  return isFloatDType(t.dtype)
    ? undefined
    : opError("FSM403", `${op} expects a floating-point ${role}, got ${typeToString(t)}`);
}

export function requireDType(op: string, t: TensorType, dtype: DType, role = "input"): OpCheckError | undefined {
  return t.dtype === dtype ? undefined : opError("FSM403", `${op} expects ${role} of dtype ${dtype}, got ${typeToString(t)}`);
}

export function requireSameDType(op: string, a: TensorType, b: TensorType): OpCheckError | undefined {
  return a.dtype === b.dtype
    ? undefined
    : opError("FSM403", `${op} needs operands of the same dtype, got ${typeToString(a)} and ${typeToString(b)}`);
}

export function requireMinRank(op: string, t: TensorType, rank: number, role = "input"): OpCheckError | undefined {
  return t.shape.length >= rank
    ? undefined
    : opError("FSM404", `${op} expects ${role} of rank ${rank} or more, got ${typeToString(t)}`);
}

/** The shared rule of linear, the norms and attention: features live in the last dimension. */
export function requireLastDim(op: string, t: TensorType, expected: Dim | number): OpCheckError | undefined {
  const want = typeof expected === "number" ? dim(expected) : expected;
  const last = t.shape[t.shape.length - 1];
  if (last === undefined) {
    return opError("FSM404", `${op} expects last dimension ${dimToString(want)}, got scalar input ${typeToString(t)}`);
  }
  return dimEq(last, want)
    ? undefined
    : opError("FSM402", `${op} expects last dimension ${dimToString(want)}, got input ${typeToString(t)}`);
}

/** Python-style axis: negative counts from the end; undefined when out of range for the rank. */
export function normalizeAxis(axis: number, rank: number): number | undefined {
  if (!Number.isInteger(axis)) return undefined;
  const a = axis < 0 ? axis + rank : axis;
  return a >= 0 && a < rank ? a : undefined;
}

export function axisError(op: string, name: string, axis: number, t: TensorType): OpCheckError {
  const r = t.shape.length;
  const range = r === 0 ? "none for a scalar" : `[-${r}, ${r - 1}]`;
  return opError("FSM404", `${op}: ${name} ${axis} is out of range for ${typeToString(t)} (valid: ${range})`);
}

// ---- broadcasting ----------------------------------------------------------------------------------------

function isOne(d: Dim): boolean {
  return d.coef === 1 && isConcrete(d);
}

/** NumPy rule, right-aligned: two dims combine when equal or when one is exactly 1; undefined otherwise. */
export function broadcastShapes(a: Shape, b: Shape): Shape | undefined {
  const n = Math.max(a.length, b.length);
  const out: Dim[] = new Array<Dim>(n);
  for (let i = 1; i <= n; i++) {
    const x = a[a.length - i];
    const y = b[b.length - i];
    let d: Dim;
    if (x === undefined) d = y!;
    else if (y === undefined || dimEq(x, y) || isOne(y)) d = x;
    else if (isOne(x)) d = y;
    else return undefined;
    out[n - i] = d;
  }
  return out;
}

/** Elementwise binary ops: same dtype, broadcast shapes. */
export function broadcastTypes(op: string, a: TensorType, b: TensorType): TensorType | OpCheckError {
  const dt = requireSameDType(op, a, b);
  if (dt) return dt;
  const shape = broadcastShapes(a.shape, b.shape);
  if (!shape) return opError("FSM402", `cannot broadcast ${typeToString(a)} with ${typeToString(b)}`);
  return { dtype: a.dtype, shape };
}

// ---- families --------------------------------------------------------------------------------------------

/** An elementwise activation (gelu, relu, silu): float x → same type. */
export function activationOp(name: string, summary: string): OpDef {
  return defineOp({
    name,
    kind: "function",
    summary,
    inputs: ["x"],
    attrs: [],
    infer: ([x]) => requireFloat(name, x!) ?? x!,
  });
}

/** An elementwise binary op (add, sub, mul, div) with broadcasting. */
export function binaryOp(name: string, summary: string): OpDef {
  return defineOp({
    name,
    kind: "function",
    summary,
    inputs: ["a", "b"],
    attrs: [],
    infer: ([a, b]) => broadcastTypes(name, a!, b!),
  });
}
