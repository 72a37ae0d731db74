// The contract of an op's `backward` rule (how autodiff asks an op for its gradients) and the helpers the
// rules share. Rules emit ordinary registry ops; the autodiff pass stamps them with phase, layer and link.
import { shapeEq, type Shape } from "./dim.js";
import type { TensorId } from "./graph.js";
import type { Attrs, TensorType } from "./types.js";

export interface BackwardArgs {
  /** The forward op's operands, as in its OpNode (module ops: tensor inputs, then parameters). */
  readonly inputs: readonly TensorId[];
  /** The forward op's output. */
  readonly output: TensorId;
  /** Gradient of the loss with respect to `output` (same type). */
  readonly dy: TensorId;
  /** The forward op's attributes with declared defaults filled in. */
  readonly attrs: Attrs;
  /** Per operand slot: whether its gradient is needed (it is a float tensor that depends on a parameter).
   *  A rule may skip the ops of unwanted slots; what it returns for them is ignored. */
  readonly wants: readonly boolean[];
}

/**
 * What a rule emits through. Input-gradient ops (`input`, phase "backward") lie on the critical path of
 * the backward pass; weight-gradient ops (`weight`, phase "weight_grad") may run later (zero-bubble
 * schedules) and must never feed an input-gradient op.
 */
export interface BackwardEmitter {
  type(t: TensorId): TensorType;
  /** Whether a forward operand is a parameter (its gradient is a weight gradient: phase "weight_grad"). */
  isParam(t: TensorId): boolean;
  /** Emits an input-gradient op and returns its (first) output. */
  input(op: string, inputs: readonly TensorId[], attrs?: Attrs): TensorId;
  /** Emits an input-gradient op with several outputs and returns them all. */
  inputMany(op: string, inputs: readonly TensorId[], attrs?: Attrs): TensorId[];
  /** Emits a weight-gradient op and returns its output. */
  weight(op: string, inputs: readonly TensorId[], attrs?: Attrs): TensorId;
}

/** Gradient per operand slot of the forward op (undefined: none, e.g. integer operands or unwanted slots). */
export type BackwardRule = (args: BackwardArgs, emit: BackwardEmitter) => readonly (TensorId | undefined)[];

/**
 * Sums a gradient of a broadcast result down to an operand's shape (the inverse of broadcasting); no op
 * when the shapes already agree. `phase` says which kind of op the reduction belongs to.
 */
export function reduceTo(e: BackwardEmitter, t: TensorId, shape: Shape, phase: "input" | "weight" = "input"): TensorId {
  if (shapeEq(e.type(t).shape, shape)) return t;
  return phase === "input" ? e.input("sum_to", [t], { shape }) : e.weight("sum_to", [t], { shape });
}
