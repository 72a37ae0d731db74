// Text forms of tensor types, attribute values and counts shared by op messages, the printer and summaries.
import { dimToString, shapeToString, type Dim } from "./dim.js";
import type { AttrType } from "./op-def.js";
import type { AttrValue, ParamRef, TensorType } from "./types.js";

/** `f32[B, S, 768]`; a scalar is `f32[]`. */
export function typeToString(t: TensorType): string {
  return `${t.dtype}${shapeToString(t.shape)}`;
}

/** `124439808` → `124,439,808` (no locale dependence, so golden texts are stable everywhere). */
export function groupDigits(n: number): string {
  const sign = n < 0 ? "-" : "";
  const digits = String(Math.abs(Math.trunc(n)));
  return sign + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

function isDim(v: AttrValue): v is Dim {
  return typeof v === "object" && !Array.isArray(v) && (v as Dim).coef !== undefined;
}

function isParamRef(v: AttrValue): v is ParamRef {
  return typeof v === "object" && !Array.isArray(v) && (v as ParamRef).kind === "ParamRef";
}

/** One attribute value as source-like text: `768`, `true`, `B*S`, `[B, S, 768]`, `wte.weight`, `"x"`. */
export function attrToString(v: AttrValue, type?: AttrType): string {
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (typeof v === "string") return type === "str" ? JSON.stringify(v) : v;
  if (Array.isArray(v)) return shapeToString(v as readonly Dim[]);
  if (isParamRef(v)) return v.name;
  if (isDim(v)) return dimToString(v);
  return String(v);
}
