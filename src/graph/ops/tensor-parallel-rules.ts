// What the tensor-parallel ops (tp_copy, tp_all_reduce, tp_all_gather, tp_slice, tp_seq_gather,
// tp_reduce_scatter) share: the `parts` and `axis` attributes, the shape of one rank's part along an axis, and the registration of an op that, unlike the other
// internal ops, sits in the forward graph and so has a backward rule (the tensor-parallel pass emits them
// before autodiff, which differentiates them like any op of the model).
import { dim, dimDiv } from "../dim.js";
import type { BackwardRule } from "../backward-rule.js";
import type { AttrSpec, OpDef } from "../op-def.js";
import type { OpCollective, OpCostRule } from "../op-cost.js";
import type { Attrs, TensorType } from "../types.js";
import { typeToString } from "../types-format.js";
import { bytesOf, dataMovementCost } from "./cost-rules.js";
import { defineInternalOp } from "./internal-rules.js";
import { opError } from "./shape-rules.js";
import type { OpCheckError } from "../op-def.js";

/** The size of the tensor-parallel group: how many ranks each hold one part. Set by the pass only, and
 *  absent (1) everywhere else, so graphs the pass did not split read exactly as before it existed. */
export const PARTS_ATTR: AttrSpec = { name: "parts", type: "int", optional: true, passOnly: true, doc: "Ranks of the tensor-parallel group that each hold one part (set by the tensor-parallel pass; absent: 1)." };

/** An op's `parts` (1 when absent). */
export function partsOf(attrs: Readonly<Record<string, unknown>>): number {
  const p = attrs["parts"];
  return typeof p === "number" ? p : 1;
}

/** The split axis of a tensor-parallel op: `axis` (set by the pass for sequence parallelism's splits along
 *  the sequence), else the last dimension. */
export const AXIS_ATTR: AttrSpec = { name: "axis", type: "int", optional: true, passOnly: true, doc: "Dimension the ranks' parts lie along (set by the tensor-parallel pass; absent: the last)." };

/** An op's split axis for a tensor of `rank` dimensions (the last when no `axis` is set). */
export function axisOf(attrs: Readonly<Record<string, unknown>>, rank: number): number {
  const a = attrs["axis"];
  return typeof a === "number" ? a : rank - 1;
}

/** One rank's part of a tensor along `axis`, whose size must be a multiple of parts (a constant, or t·S for a
 *  sequence-parallel rank's whole sequence). */
export function axisSlice(op: string, t: TensorType, parts: number, axis: number): TensorType | OpCheckError {
  const d = t.shape[axis];
  const part = d ? dimDiv(d, dim(parts)) : undefined;
  if (!part) return opError("FSM402", `${op}: dimension ${axis} of ${typeToString(t)} does not split into ${parts} parts`);
  return { dtype: t.dtype, shape: t.shape.map((s, i) => (i === axis ? part : s)) };
}

/** The whole of a tensor of which one rank holds a 1/parts part along `axis`. */
export function axisWhole(t: TensorType, parts: number, axis: number): TensorType {
  return { dtype: t.dtype, shape: t.shape.map((s, i) => (i === axis ? { coef: s.coef * parts, syms: s.syms } : s)) };
}

/** A cost rule of an op that computes nothing: `copied(inputs)` bytes moved in memory and the collectives. */
export function collectiveCost(moved: (inputs: readonly TensorType[], attrs: Attrs) => TensorType | undefined, list: (inputs: readonly TensorType[], attrs: Attrs) => readonly { phase: OpCollective["phase"]; kind: OpCollective["kind"]; type: TensorType }[]): OpCostRule {
  return (inputs, attrs, b) => {
    const m = moved(inputs, attrs);
    const bytes = m ? bytesOf(m, b) : 0;
    return {
      ...dataMovementCost(bytes, bytes),
      collectives: { groupSize: partsOf(attrs), list: list(inputs, attrs).map((c) => ({ phase: c.phase, kind: c.kind, bytes: bytesOf(c.type, b) })) },
    };
  };
}

/** Registers a tensor-parallel op: an internal op (never written in .fsm source) with a backward and a cost. */
export function defineTensorParallelOp(spec: Parameters<typeof defineInternalOp>[0] & { backward: BackwardRule; cost: OpCostRule }): OpDef {
  const { backward, cost, ...rest } = spec;
  return { ...defineInternalOp(rest), backward, cost };
}
