// The kernel contract: one function per registry op, computing its outputs from its operands' values.
import type { Attrs } from "../../graph/types.js";
import type { FloatTensor, FloatKind, Tensor } from "../tensor.js";
import { floatArray, sizeOf } from "../tensor.js";

export interface KernelContext {
  /** Output shapes, from the graph's output types at the run's values of B and S. */
  readonly outShapes: readonly (readonly number[])[];
  /** Per output: whether it holds integers (i32) rather than floats. */
  readonly outInt?: readonly boolean[];
  readonly float: FloatKind;
  /** This rank's index in its tensor-parallel group (ops split by the tensor-parallel pass); absent: 0. */
  readonly tensorRank?: number;
}

/** Kernels read operands, never write them, and return fresh output tensors in order. */
export type Kernel = (inputs: readonly Tensor[], attrs: Attrs, ctx: KernelContext) => Tensor[];

/** A zero-filled float tensor of the run's float kind. */
export function alloc(ctx: KernelContext, shape: readonly number[]): FloatTensor {
  return { shape: [...shape], data: floatArray(ctx.float, sizeOf(shape)) };
}

/** A float scalar of the run's float kind. */
export function scalar(ctx: KernelContext, v: number): FloatTensor {
  const t = alloc(ctx, []);
  t.data[0] = v;
  return t;
}

/** Attribute accessors for kernels: the graph was verified, so a missing attribute is an internal error. */
export function attrNum(attrs: Attrs, name: string): number {
  const v = attrs[name];
  if (typeof v !== "number") throw new Error(`internal: kernel attribute '${name}' must be a number`);
  return v;
}

export function attrBool(attrs: Attrs, name: string): boolean {
  const v = attrs[name];
  if (typeof v !== "boolean") throw new Error(`internal: kernel attribute '${name}' must be a bool`);
  return v;
}

/** Python-style axis → index in [0, rank). */
export function axisOf(axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!(a >= 0 && a < rank)) throw new Error(`internal: axis ${axis} out of range for rank ${rank}`);
  return a;
}
