// How a device of a tensor-parallel group runs the ops the tensor-parallel pass (src/passes/tensor-parallel.ts)
// puts in its graph. Every device of the group runs the same graph on its own slices; what differs is its rank
// in the group and the collectives it joins:
//   - tp_all_reduce (Megatron's "g") is a communicator all-reduce over the group, on a copy of its operand;
//   - tp_all_gather and tp_seq_gather join the ranks' parts along an axis (the last, or the sequence's): one
//     all-gather of the flat parts (rank-major, [parts, outer, n]) and a transpose into [outer, parts·n];
//   - tp_reduce_scatter is the reverse: a transpose of [outer, parts·n] into [parts, outer, n], then one
//     reduce-scatter, each rank keeping the sum of its part;
//   - the vocabulary-parallel loss and its gradient move row statistics, never the logits (Megatron-LM's):
//     each rank's row maxima all-gathered, then its Σ exp(l − M) and target logits all-reduced, and the whole
//     loss (or the rank's part of its gradient) computed from them on every rank (the fsm_vocab_ce_* kernels);
//   - tp_slice and the vocabulary-parallel lookup and its gradient are kernels told the device's rank
//     (`tensor_rank`), since the graph's op is the same on every rank.
import { axisOf, partsOf } from "../graph/ops/tensor-parallel-rules.js";
import { aroundAxis } from "../graph/param-split.js";
import type { NativeAttrs } from "../native/binding.js";
import { COMM, COMPUTE, type DeviceBuilder } from "./device-program.js";

/** Ops of a tensor-parallel graph that are communicator calls here, not kernels. */
export const COMMUNICATOR_OPS: ReadonlySet<string> = new Set(["tp_all_reduce", "tp_all_gather", "tp_seq_gather", "tp_reduce_scatter"]);

/** Ops whose kernel reads the device's rank in its group when the op is split (`parts` > 1). */
const RANKED = new Set(["tp_slice", "embedding", "embedding_grad_weight"]);

/** A device's place in its tensor-parallel group: its rank there and the group's global ranks, ascending. */
export interface TensorPlace {
  readonly rank: number;
  readonly group: readonly number[];
  /** The vocabulary-parallel loss's row statistics by logits slot: the forward's, which the backward reads
   *  on the same logits instead of exchanging them again (a recomputed forward has its own slot). */
  readonly rowStats: Map<number, RowStats>;
}

/** Every rank's row maxima [parts, rows], and [Σ exp(l − M); the target's logit] [2, rows] over the group. */
interface RowStats {
  readonly maxes: number;
  readonly sums: number;
}

/** Emits a split op of a tensor-parallel graph; false when `op` runs as its plain kernel. Operands are f32 or
 *  i32 slots (the CPU lowering's widened values). */
export function lowerTensorParallelOp(b: DeviceBuilder, place: TensorPlace, op: string, attrs: NativeAttrs, ins: readonly number[], outs: readonly number[], text: string): boolean {
  const parts = partsOf(attrs);
  if (parts === 1) return false;
  if (parts !== place.group.length) throw new Error(`internal: ${text}: ${op} is split ${parts} ways, the device's tensor-parallel group has ${place.group.length} ranks`);
  const group = [...place.group];
  switch (op) {
    case "tp_all_reduce":
      b.emit(COMPUTE, "fsm_copy", [ins[0]!], [outs[0]!], {}, text);
      b.emit(COMM, "comm.allReduce", [outs[0]!], [outs[0]!], { group }, text);
      return true;
    case "tp_all_gather":
    case "tp_seq_gather":
      gatherAlong(b, group, ins[0]!, axisOf(attrs, b.shape(ins[0]!).length), outs[0]!, text);
      return true;
    case "tp_reduce_scatter":
      reduceScatterAlong(b, group, ins[0]!, axisOf(attrs, b.shape(ins[0]!).length), outs[0]!, text);
      return true;
    case "cross_entropy": {
      const stats = rowStatistics(b, place, ins[0]!, ins[1]!, text);
      b.emit(COMPUTE, "fsm_vocab_ce_loss", [stats.sums, stats.maxes], outs, {}, text);
      return true;
    }
    case "cross_entropy_grad": {
      const stats = rowStatistics(b, place, ins[1]!, ins[2]!, text);
      b.emit(COMPUTE, "fsm_vocab_ce_grad", [ins[0]!, ins[1]!, ins[2]!, stats.sums, stats.maxes], outs, { tensor_rank: place.rank }, text);
      return true;
    }
    default:
      if (!RANKED.has(op)) return false;
      b.emit(COMPUTE, op, ins, outs, { ...attrs, tensor_rank: place.rank }, text);
      return true;
  }
}

/** The vocabulary-parallel loss's row statistics: every rank's row maxima (all-gathered), then Σ exp(l − M)
 *  over the group's classes and the target's logit (all-reduced); once per logits slot. */
function rowStatistics(b: DeviceBuilder, place: TensorPlace, logits: number, targets: number, text: string): RowStats {
  const known = place.rowStats.get(logits);
  if (known) return known;
  const shape = b.shape(logits);
  const rows = shape.reduce((x, y) => x * y, 1) / shape[shape.length - 1]!;
  const group = [...place.group];
  const mine = b.slot([rows]);
  b.emit(COMPUTE, "fsm_vocab_ce_max", [logits], [mine], {}, text);
  const maxes = b.slot([group.length, rows]);
  b.emit(COMM, "comm.allGather", [mine], [maxes], { group }, text);
  const sums = b.slot([2, rows]);
  b.emit(COMPUTE, "fsm_vocab_ce_sums", [logits, targets, maxes], [sums], { tensor_rank: place.rank }, text);
  b.emit(COMM, "comm.allReduce", [sums], [sums], { group }, text);
  place.rowStats.set(logits, { maxes, sums });
  return { maxes, sums };
}

/** A slot's shape around `axis`: the blocks before it (outer) and the elements of one block (n). */
function around(shape: readonly number[], axis: number): { outer: number; n: number } {
  const { outer, inner } = aroundAxis(shape, axis);
  return { outer, n: shape[axis]! * inner };
}

/** The group's parts of `slot` along `axis` joined in rank order, into `into` (or a new slot). */
function gatherAlong(b: DeviceBuilder, group: readonly number[], slot: number, axis: number, into: number | undefined, text: string): number {
  const shape = b.shape(slot);
  const { outer, n } = around(shape, axis);
  const parts = group.length;
  const flat = b.slot([parts, outer, n]);
  b.emit(COMM, "comm.allGather", [slot], [flat], { group: [...group] }, text);
  const out = into ?? b.slot(shape.map((d, i) => (i === axis ? d * parts : d)));
  b.emit(COMPUTE, "transpose", [flat], [b.view(out, 0, [outer, parts, n])], { dim0: 0, dim1: 1 }, text);
  return out;
}

/** The group's sum of `slot`, each rank keeping its part along `axis`, into `into`. */
function reduceScatterAlong(b: DeviceBuilder, group: readonly number[], slot: number, axis: number, into: number, text: string): void {
  const parts = group.length;
  const { outer, n } = around(b.shape(slot), axis);
  const byRank = b.slot([parts, outer, n / parts]);
  b.emit(COMPUTE, "transpose", [b.view(slot, 0, [outer, parts, n / parts])], [byRank], { dim0: 0, dim1: 1 }, text);
  b.emit(COMM, "comm.reduceScatter", [byRank], [into], { group: [...group] }, text);
}
