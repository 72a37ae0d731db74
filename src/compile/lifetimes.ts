// Buffer lifetimes in program terms, as the compile steps that create buffers report them to the memory plan.
import type { BufferKind } from "../plan/plan.js";

export interface Lifetime {
  readonly program: number;
  readonly name: string;
  readonly kind: BufferKind;
  readonly bytes: number;
  /** Allocated when this action starts, or when it starts `fromLayer` when given (a buffer made inside a
   *  compute action: an FSDP unit's unsharded gradient appears when the backward reaches the unit). */
  readonly from: number;
  readonly fromLayer?: number;
  /** Released when this action ends, or when it finishes `toLayer` when given. */
  readonly to: number;
  readonly toLayer?: number;
  /** The stage and micro-batch it belongs to, for reports and tests. */
  readonly stage?: number;
  readonly mb?: number;
}
