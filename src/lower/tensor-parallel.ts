// How a device of a tensor-parallel group runs the ops the tensor-parallel pass (src/passes/tensor-parallel.ts)
// puts in its graph. Every device of the group runs the same graph on its own slices; what differs is its rank
// in the group and the collectives it joins:
//   - tp_all_reduce (Megatron's "g") is a communicator all-reduce over the group, on a copy of its operand;
//   - tp_all_gather joins the ranks' last-dimension slices: one all-gather of the flat slices (rank-major,
//     [parts, rows, n]) and a transpose into [rows, parts·n];
//   - the vocabulary-parallel loss and its gradient gather the logits' slices and compute the whole loss on
//     every rank (the gradient then keeps the rank's slice) — the same values as the group interpreter
//     (src/interp/tensor-parallel.ts), at the price of one [rows, V] buffer where Megatron's kernel all-reduces
//     three numbers per row;
//   - tp_slice and the vocabulary-parallel lookup and its gradient are kernels told the device's rank
//     (`tensor_rank`), since the graph's op is the same on every rank.
import type { NativeAttrs } from "../native/binding.js";
import { COMM, COMPUTE, type DeviceBuilder } from "./device-program.js";

/** Ops of a tensor-parallel graph that are communicator calls here, not kernels. */
export const COMMUNICATOR_OPS: ReadonlySet<string> = new Set(["tp_all_reduce", "tp_all_gather"]);

/** Ops whose kernel reads the device's rank in its group when the op is split (`parts` > 1). */
const RANKED = new Set(["tp_slice", "embedding", "embedding_grad_weight"]);

/** A device's place in its tensor-parallel group: its rank there and the group's global ranks, ascending. */
export interface TensorPlace {
  readonly rank: number;
  readonly group: readonly number[];
}

/** Emits a split op of a tensor-parallel graph; false when `op` runs as its plain kernel. Operands are f32 or
 *  i32 slots (the CPU lowering's widened values). */
export function lowerTensorParallelOp(b: DeviceBuilder, place: TensorPlace, op: string, attrs: NativeAttrs, ins: readonly number[], outs: readonly number[], text: string): boolean {
  const parts = typeof attrs.parts === "number" ? attrs.parts : 1;
  if (parts === 1) return false;
  if (parts !== place.group.length) throw new Error(`internal: ${text}: ${op} is split ${parts} ways, the device's tensor-parallel group has ${place.group.length} ranks`);
  const group = [...place.group];
  const { parts: _, ...whole } = attrs;
  switch (op) {
    case "tp_all_reduce":
      b.emit(COMPUTE, "fsm_copy", [ins[0]!], [outs[0]!], {}, text);
      b.emit(COMM, "comm.allReduce", [outs[0]!], [outs[0]!], { group }, text);
      return true;
    case "tp_all_gather":
      gatherLast(b, group, ins[0]!, outs[0]!, text);
      return true;
    case "cross_entropy": {
      const logits = gatherLast(b, group, ins[0]!, undefined, text);
      b.emit(COMPUTE, "cross_entropy", [logits, ins[1]!], outs, whole, text);
      return true;
    }
    case "cross_entropy_grad": {
      const logits = gatherLast(b, group, ins[1]!, undefined, text);
      const grad = b.slot(b.shape(logits));
      b.emit(COMPUTE, "cross_entropy_grad", [ins[0]!, logits, ins[2]!], [grad], whole, text);
      b.emit(COMPUTE, "tp_slice", [grad], outs, { parts, tensor_rank: place.rank }, text);
      return true;
    }
    default:
      if (!RANKED.has(op)) return false;
      b.emit(COMPUTE, op, ins, outs, { ...attrs, tensor_rank: place.rank }, text);
      return true;
  }
}

/** The group's last-dimension slices of `slot` joined in rank order, into `into` (or a new slot). */
function gatherLast(b: DeviceBuilder, group: readonly number[], slot: number, into: number | undefined, text: string): number {
  const shape = b.shape(slot);
  const n = shape[shape.length - 1] ?? 1;
  const rows = shape.reduce((x, y) => x * y, 1) / n;
  const parts = group.length;
  const flat = b.slot([parts, rows, n]);
  b.emit(COMM, "comm.allGather", [slot], [flat], { group: [...group] }, text);
  const out = into ?? b.slot([...shape.slice(0, -1), parts * n]);
  b.emit(COMPUTE, "transpose", [flat], [b.view(out, 0, [rows, parts, n])], { dim0: 0, dim1: 1 }, text);
  return out;
}
