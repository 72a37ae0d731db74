// How a training precision maps graph types to what lives on the device: the graph is written in f32, and
// bf16/fp16 mixed precision computes with 16-bit copies of weights and activations (fp32 master weights are
// optimizer state, see memory.ts). Integer tensors (token ids, targets) are unchanged.
import type { Precision } from "../check/settings-types.js";
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import type { DimBindings } from "../graph/op-cost.js";
import { bytesOf } from "../graph/ops/cost-rules.js";
import { isFloatDType, type DType, type TensorType } from "../graph/types.js";

export function computeDType(precision: Precision): DType {
  return precision === "bf16" ? "bf16" : precision === "fp16" ? "f16" : "f32";
}

export function onDevice(t: TensorType, precision: Precision): TensorType {
  if (!isFloatDType(t.dtype)) return t;
  const dtype = computeDType(precision);
  return dtype === t.dtype ? t : { dtype, shape: t.shape };
}

/**
 * What an op adds to the bytes live around it on a device whose kernels compute in f32 (the CPU runtime's),
 * given which of its operands it reads last (`dying`): each 16-bit operand is widened into an f32 temporary
 * before the kernel (a last-read 16-bit operand is freed once widened), and each 16-bit result is written to
 * an f32 temporary and narrowed after it (its 16-bit bytes, counted from the op on, exist only from then).
 * The most of three moments: every operand widened; the kernel (widened operands, f32 results); the
 * narrowing (f32 and 16-bit results). What is stored in 16 bits under mixed precision: float activations,
 * activation gradients and the weights' compute copies; model inputs, parameter gradients (the weight_grad
 * phase: accumulated and reduced in f32) and the loss stay f32.
 */
export function widenedScratchBytes(g: Graph, op: OpId, precision: Precision, bindings: DimBindings, dying: (t: TensorId) => boolean = () => false): number {
  if (precision === "fp32") return 0;
  const o = g.op(op);
  const stored16 = (t: TensorId): boolean => {
    const info = g.tensor(t);
    if (!isFloatDType(info.type.dtype) || info.kind === "input" || info.kind === "state" || t === g.loss) return false;
    const producer = info.producer === undefined ? undefined : g.op(info.producer);
    return producer?.phase !== "weight_grad";
  };
  const wide = (t: TensorId): number => bytesOf({ ...g.tensor(t).type, dtype: "f32" }, bindings);
  let widened = 0;
  let freed = 0;
  for (const t of new Set(o.inputs)) {
    if (!stored16(t)) continue;
    widened += wide(t);
    if (dying(t)) freed += wide(t) / 2;
  }
  let results = 0;
  for (const t of o.outputs) if (stored16(t)) results += wide(t);
  // Against the caller's count, which holds the 16-bit results (h = results / 2) and the dying operands:
  // widening W − h, kernel W + F − h − freed, narrowing F − freed.
  const h = results / 2;
  return Math.max(widened - h, widened + h - freed, results - freed);
}
