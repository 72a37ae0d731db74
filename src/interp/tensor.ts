// The interpreter's tensor: a row-major array with a concrete shape. Floats are Float32Array by default and
// Float64Array for gradient checks (one run uses one kind); integer tensors (ids) are Int32Array.
export type FloatArray = Float32Array | Float64Array;
export type FloatKind = "f32" | "f64";

export interface Tensor {
  readonly shape: readonly number[];
  readonly data: FloatArray | Int32Array;
}

export interface FloatTensor extends Tensor {
  readonly data: FloatArray;
}

export function floatArray(kind: FloatKind, n: number): FloatArray {
  return kind === "f64" ? new Float64Array(n) : new Float32Array(n);
}

/** Element count; the empty shape (a scalar) has one. */
export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function floats(t: Tensor, what = "operand"): FloatArray {
  if (t.data instanceof Int32Array) throw new Error(`internal: ${what} must be a float tensor, got i32`);
  return t.data;
}

export function ints(t: Tensor, what = "operand"): Int32Array {
  if (!(t.data instanceof Int32Array)) throw new Error(`internal: ${what} must be an i32 tensor`);
  return t.data;
}

/** A copy in the given float kind (parameters move between f32 and f64 runs this way). */
export function toKind(t: Tensor, kind: FloatKind): FloatTensor {
  const data = floatArray(kind, t.data.length);
  data.set(t.data);
  return { shape: [...t.shape], data };
}
