// How a training precision maps graph types to what lives on the device: the graph is written in f32, and
// bf16/fp16 mixed precision computes with 16-bit copies of weights and activations (fp32 master weights are
// optimizer state, see memory.ts). Integer tensors (token ids, targets) are unchanged.
import type { Precision } from "../check/settings-types.js";
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import type { DimBindings } from "../graph/op-cost.js";
import { bytesOf } from "../graph/ops/cost-rules.js";
import { isFloatDType, type DType, type TensorType } from "../graph/types.js";
import type { DeviceProfile } from "./profile.js";

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
 *
 * Returns the pricer for one graph, precision and binding: each op's widened operands and results are
 * found once and kept, since a backward's peak walk asks for every op at each of its positions.
 */
export function widenedScratch(g: Graph, precision: Precision, bindings: DimBindings): (op: OpId, dying?: (t: TensorId) => boolean) => number {
  if (precision === "fp32") return () => 0;
  const stored16 = (t: TensorId): boolean => {
    const info = g.tensor(t);
    if (!isFloatDType(info.type.dtype) || info.kind === "input" || info.kind === "state" || t === g.loss) return false;
    const producer = info.producer === undefined ? undefined : g.op(info.producer);
    return producer?.phase !== "weight_grad";
  };
  const wide = (t: TensorId): number => bytesOf({ ...g.tensor(t).type, dtype: "f32" }, bindings);
  const perOp = new Map<OpId, { operands: [TensorId, number][]; widened: number; results: number }>();
  const shape = (op: OpId): { operands: [TensorId, number][]; widened: number; results: number } => {
    let known = perOp.get(op);
    if (known) return known;
    const o = g.op(op);
    const operands: [TensorId, number][] = [];
    for (const t of new Set(o.inputs)) if (stored16(t)) operands.push([t, wide(t)]);
    let results = 0;
    for (const t of o.outputs) if (stored16(t)) results += wide(t);
    known = { operands, widened: operands.reduce((n, [, b]) => n + b, 0), results };
    perOp.set(op, known);
    return known;
  };
  return (op, dying = () => false) => {
    const { operands, widened, results } = shape(op);
    let freed = 0;
    for (const [t, b] of operands) if (dying(t)) freed += b / 2;
    // Against the caller's count, which holds the 16-bit results (h = results / 2) and the dying operands:
    // widening W − h, kernel W + F − h − freed, narrowing F − freed.
    const h = results / 2;
    return Math.max(widened - h, widened + h - freed, results - freed);
  };
}

/** What an op adds while it runs on this device: the widened scratch where kernels compute in f32 on
 *  16-bit operands (widens16BitOperands), else nothing. */
export function opScratch(profile: DeviceProfile, g: Graph, precision: Precision, bindings: DimBindings): (op: OpId, dying?: (t: TensorId) => boolean) => number {
  return profile.widens16BitOperands ? widenedScratch(g, precision, bindings) : () => 0;
}

/** A weight-gradient op's own results in f32 (parameter gradients are f32, train.reduce_dtype's default):
 *  the buffer a runtime makes them in before adding them to a step's accumulator. */
export function weightGradientBytes(g: Graph, bindings: DimBindings): (op: OpId) => number {
  return (op) => {
    const o = g.op(op);
    if (o.phase !== "weight_grad") return 0;
    return o.outputs.reduce((n, t) => n + bytesOf({ ...g.tensor(t).type, dtype: "f32" }, bindings), 0);
  };
}
