// Type-directed conversion of evaluated arguments: op attributes (int, float, bool, str, enum, dim, shape,
// param) and block parameters (int, float, bool, str), with FSM401 messages that name what was expected.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type { AttrSpec } from "../graph/op-def.js";
import type { AttrValue } from "../graph/types.js";
import type { Expr } from "../parse/ast.js";
import { asDim, evalExpr, type EvalContext } from "./const-eval.js";
import type { Env } from "./env.js";
import { didYouMean } from "./suggest.js";
import { describe, type Value } from "./values.js";

export const BLOCK_PARAM_TYPES = ["int", "float", "bool", "str"] as const;

/** Evaluates `e` for attribute `spec`; enum attributes accept bare words (`act: gelu`). */
export function evalAttr(cx: EvalContext, spec: AttrSpec, e: Expr, env: Env, what: string): AttrValue | undefined {
  const v = spec.type === "enum" && e.kind === "Name" && env.lookup(e.name) === undefined ? { k: "word" as const, name: e.name } : evalExpr(cx, e, env);
  if (v.k === "error") return undefined;
  const out = toAttr(spec, v);
  if (out === undefined) {
    const expected = spec.type === "enum" ? `one of ${spec.values?.join(", ")}` : expectedText(spec.type);
    cx.diags.push(error("FSM401", `argument '${spec.name}' of ${what} must be ${expected}, got ${describe(v)}`, e.span, spec.type === "enum" && v.k === "word" ? didYouMean(v.name, spec.values ?? []) : []));
  }
  return out;
}

function expectedText(t: AttrSpec["type"]): string {
  switch (t) {
    case "int":
      return "an int";
    case "float":
      return "a number";
    case "bool":
      return "true or false";
    case "str":
      return "a string";
    case "dim":
      return "a positive dimension (an int, B, S or a product)";
    case "shape":
      return "a list of dimensions";
    case "param":
      return "a parameter such as wte.weight";
    case "enum":
      return "a name";
  }
}

function toAttr(spec: AttrSpec, v: Value): AttrValue | undefined {
  switch (spec.type) {
    case "int":
      return v.k === "int" ? v.v : undefined;
    case "float":
      return v.k === "int" || v.k === "float" ? v.v : undefined;
    case "bool":
      return v.k === "bool" ? v.v : undefined;
    case "str":
      return v.k === "str" ? v.v : undefined;
    case "enum": {
      const w = v.k === "word" ? v.name : v.k === "str" ? v.v : undefined;
      return w !== undefined && (spec.values ?? []).includes(w) ? w : undefined;
    }
    case "dim":
      return asDim(v);
    case "shape": {
      if (v.k !== "list" && v.k !== "tuple") return undefined;
      const dims = v.items.map(asDim);
      return dims.every((d) => d !== undefined) ? (dims as AttrValue) : undefined;
    }
    case "param":
      return v.k === "param" ? { kind: "ParamRef", name: v.name, type: v.type } : undefined;
  }
}

/** Checks a block argument against its declared type; ints widen to float. */
export function convertBlockArg(diags: Diagnostic[], type: string, v: Value, span: Span, what: string): Value | undefined {
  if (v.k === "error") return undefined;
  const ok =
    (type === "int" && v.k === "int") ||
    (type === "float" && (v.k === "int" || v.k === "float")) ||
    (type === "bool" && v.k === "bool") ||
    (type === "str" && v.k === "str");
  if (!ok) {
    diags.push(error("FSM401", `${what} must be ${type === "int" ? "an int" : type === "float" ? "a float" : type}, got ${describe(v)}`, span));
    return undefined;
  }
  return type === "float" && v.k === "int" ? { k: "float", v: v.v } : v;
}
