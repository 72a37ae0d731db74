// Expression evaluation shared by constants, arguments, settings and forward code. Numbers, symbolic dims,
// tuples, lists, member access and indexing are handled here; calls and tensor arithmetic are delegated to
// the forward builder through EvalContext hooks, so constant contexts simply have no such hooks.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import { dim, dimDiv, dimMul, isConcrete, type Dim } from "../graph/dim.js";
import type { AttrValue, ParamRef } from "../graph/types.js";
import type { BinaryOp, CallExpr, Expr } from "../parse/ast.js";
import type { Env } from "./env.js";
import { childPath } from "./instances.js";
import { didYouMean } from "./suggest.js";
import { describe, ERROR, type Value } from "./values.js";

export interface EvalContext {
  readonly diags: Diagnostic[];
  /** Settings contexts: an unknown bare name is an enum word (`fsdp`, `1f1b`) rather than an error. */
  readonly words?: boolean;
  /** Forward code: op and member calls. Absent in constant contexts. */
  call?(e: CallExpr, env: Env): Value;
  /** Forward code: arithmetic where an operand is a tensor. */
  tensorBinary?(op: BinaryOp | "neg", a: Value, b: Value | undefined, span: Span): Value;
  /** Extra names offered in "did you mean" (ops and blocks at call sites). */
  extraNames?(): string[];
}

export function evalExpr(cx: EvalContext, e: Expr, env: Env): Value {
  switch (e.kind) {
    case "Number":
      return e.isInt ? { k: "int", v: e.value } : { k: "float", v: e.value };
    case "String":
      return { k: "str", v: e.value };
    case "Bool":
      return { k: "bool", v: e.value };
    case "Auto":
      return { k: "auto" };
    case "Name": {
      const v = env.lookup(e.name);
      if (v !== undefined) return v;
      if (cx.words) return { k: "word", name: e.name };
      cx.diags.push(
        error("FSM300", `unknown name '${e.name}'`, e.span, didYouMean(e.name, [...env.names(), ...(cx.extraNames?.() ?? [])])),
      );
      return ERROR;
    }
    case "Tuple":
    case "List": {
      const items = e.items.map((i) => evalExpr(cx, i, env));
      if (items.some((i) => i.k === "error")) return ERROR;
      return { k: e.kind === "Tuple" ? "tuple" : "list", items };
    }
    case "Member":
      return evalMember(cx, evalExpr(cx, e.object, env), e.property.name, e.property.span);
    case "Index":
      return evalIndex(cx, evalExpr(cx, e.object, env), evalExpr(cx, e.index, env), e.span);
    case "Call":
      if (cx.call) return cx.call(e, env);
      return evalConstCall(cx, e, env);
    case "Unary": {
      const v = evalExpr(cx, e.operand, env);
      if (e.op === "+") return v;
      if (v.k === "int" || v.k === "float") return { k: v.k, v: -v.v };
      if (v.k === "tensor" && cx.tensorBinary) return cx.tensorBinary("neg", v, undefined, e.span);
      if (v.k === "error") return v;
      cx.diags.push(error("FSM401", `cannot negate ${describe(v)}`, e.span));
      return ERROR;
    }
    case "Binary": {
      const a = evalExpr(cx, e.left, env);
      const b = evalExpr(cx, e.right, env);
      if (a.k === "error" || b.k === "error") return ERROR;
      if ((a.k === "tensor" || b.k === "tensor") && cx.tensorBinary) return cx.tensorBinary(e.op, a, b, e.span);
      return arith(cx, e.op, a, b, e.span);
    }
  }
}

/** In constant contexts (settings), `adamw(lr: 1e-3)` is a constructor value checked by the settings checker. */
function evalConstCall(cx: EvalContext, e: CallExpr, env: Env): Value {
  if (e.callee.kind !== "Name") {
    cx.diags.push(error("FSM405", "only a name can be called here", e.callee.span));
    return ERROR;
  }
  const args = e.args.map((a) => ({ ...(a.name ? { name: a.name.name } : {}), value: evalExpr(cx, a.value, env) }));
  if (args.some((a) => a.value.k === "error")) return ERROR;
  return { k: "ctor", name: e.callee.name, args };
}

function evalMember(cx: EvalContext, obj: Value, prop: string, span: Span): Value {
  if (obj.k === "error") return obj;
  if (obj.k === "instance") {
    const inst = obj.inst;
    if (inst.kind === "block") {
      const m = inst.members.get(prop);
      if (m) return { k: "instance", inst: m };
      cx.diags.push(error("FSM309", `'${inst.path}' has no member '${prop}'`, span, didYouMean(prop, inst.members.keys())));
      return ERROR;
    }
    if (inst.kind === "op") {
      const tied = inst.tie?.local === prop ? inst.attrs["tie"] : undefined;
      if (isParamRef(tied)) return { k: "param", name: tied.name, type: tied.type };
      const spec = inst.params.find((p) => p.name === prop);
      if (spec) return { k: "param", name: childPath(inst.path, prop), type: { dtype: "f32", shape: spec.shape } };
      const names = [...inst.params.map((p) => p.name), ...(inst.tie ? [inst.tie.local] : [])];
      cx.diags.push(error("FSM309", `'${inst.path}' (${inst.def.name}) has no parameter '${prop}'`, span, didYouMean(prop, names)));
      return ERROR;
    }
  }
  cx.diags.push(error("FSM309", `${describe(obj)} has no member '${prop}'`, span));
  return ERROR;
}

function evalIndex(cx: EvalContext, obj: Value, idx: Value, span: Span): Value {
  if (obj.k === "error" || idx.k === "error") return ERROR;
  if (idx.k !== "int") {
    cx.diags.push(error("FSM401", `an index must be an int, got ${describe(idx)}`, span));
    return ERROR;
  }
  let items: readonly Value[] | undefined;
  if (obj.k === "instance" && obj.inst.kind === "repeat") items = obj.inst.items.map((inst) => ({ k: "instance", inst }) as const);
  else if (obj.k === "list" || obj.k === "tuple") items = obj.items;
  if (!items) {
    cx.diags.push(error("FSM405", `${describe(obj)} cannot be indexed`, span));
    return ERROR;
  }
  const i = idx.v < 0 ? items.length + idx.v : idx.v;
  const item = items[i];
  if (item === undefined) {
    cx.diags.push(error("FSM409", `index ${idx.v} is out of range for ${items.length} items`, span));
    return ERROR;
  }
  return item;
}

/** Integers or symbolic dims as a Dim, else undefined. */
export function asDim(v: Value): Dim | undefined {
  if (v.k === "int" && Number.isInteger(v.v) && v.v > 0) return dim(v.v);
  if (v.k === "dim") return v.d;
  return undefined;
}

function fromDim(d: Dim): Value {
  return isConcrete(d) ? { k: "int", v: d.coef } : { k: "dim", d };
}

function arith(cx: EvalContext, op: BinaryOp, a: Value, b: Value, span: Span): Value {
  const fail = (why: string): Value => {
    cx.diags.push(error("FSM400", why, span));
    return ERROR;
  };
  if (a.k === "dim" || b.k === "dim") {
    const da = asDim(a);
    const db = asDim(b);
    if (!da || !db) return fail(`cannot apply '${op}' to ${describe(a)} and ${describe(b)}`);
    if (op === "*") {
      const p = dimMul(da, db);
      return Number.isSafeInteger(p.coef) ? fromDim(p) : fail(`${describe(a)} * ${describe(b)} has a factor beyond ${EXACT_LIMIT}`);
    }
    if (op === "/") {
      const q = dimDiv(da, db);
      return q ? fromDim(q) : fail(`${describe(a)} is not divisible by ${describe(b)}`);
    }
    return fail(`'${op}' is not supported on symbolic dimensions (only * and exact /)`);
  }
  const numeric = (v: Value): v is { k: "int" | "float"; v: number } => v.k === "int" || v.k === "float";
  if (!numeric(a) || !numeric(b)) {
    if (op === "+" && a.k === "str" && b.k === "str") return { k: "str", v: a.v + b.v };
    cx.diags.push(error("FSM401", `cannot apply '${op}' to ${describe(a)} and ${describe(b)}`, span));
    return ERROR;
  }
  const bothInt = a.k === "int" && b.k === "int";
  const x = a.v;
  const y = b.v;
  // A result must be the number the expression means: no Infinity from overflow, no rounded integers.
  const exact = (k: "int" | "float", v: number): Value => {
    if (!Number.isFinite(v)) return fail(`${x} ${op} ${y} overflows to ${v}: a value must be a finite number`);
    if (k === "int" && !Number.isSafeInteger(v)) return fail(`${x} ${op} ${y} is beyond ${EXACT_LIMIT}, past which integers are not exact`);
    return { k, v };
  };
  switch (op) {
    case "+":
      return exact(bothInt ? "int" : "float", x + y);
    case "-":
      return exact(bothInt ? "int" : "float", x - y);
    case "*":
      return exact(bothInt ? "int" : "float", x * y);
    case "/":
      if (y === 0) return fail("division by zero");
      // Exact integer division stays an int so `d / heads` can size a layer.
      return bothInt && x % y === 0 ? exact("int", x / y) : exact("float", x / y);
    case "%":
      if (y === 0) return fail("modulo by zero");
      return exact(bothInt ? "int" : "float", ((x % y) + y) % y);
  }
}

/** Integers are exact up to 2^53 - 1; literals (src/parse/number-literal.ts) and arithmetic stay within it. */
const EXACT_LIMIT = `2^53 - 1 = ${Number.MAX_SAFE_INTEGER}`;

export function isParamRef(v: AttrValue | undefined): v is ParamRef {
  return typeof v === "object" && v !== null && "kind" in v && v.kind === "ParamRef";
}
