// Tensor types and attribute values shared by the op registry, the checker and the graph IR.
import type { Dim, Shape } from "./dim.js";

export const DTYPES = ["f32", "bf16", "f16", "i32"] as const;
export type DType = (typeof DTYPES)[number];

export const DTYPE_BYTES: Readonly<Record<DType, number>> = { f32: 4, bf16: 2, f16: 2, i32: 4 };

export function isFloatDType(t: DType): boolean {
  return t !== "i32";
}

export interface TensorType {
  readonly dtype: DType;
  readonly shape: Shape;
}

/** A reference to another member's parameter (for `tie:`), resolved by the checker. */
export interface ParamRef {
  readonly kind: "ParamRef";
  /** Full hierarchical name, e.g. `wte.weight`. */
  readonly name: string;
  readonly type: TensorType;
}

/** int/float → number, bool → boolean, str/enum → string, dim → Dim, shape → Dim[], param → ParamRef. */
export type AttrValue = number | boolean | string | Dim | readonly Dim[] | ParamRef;
export type Attrs = Readonly<Record<string, AttrValue>>;
