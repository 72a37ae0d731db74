// How a training precision maps graph types to what lives on the device: the graph is written in f32, and
// bf16/fp16 mixed precision computes with 16-bit copies of weights and activations (fp32 master weights are
// optimizer state, see memory.ts). Integer tensors (token ids, targets) are unchanged.
import type { Precision } from "../check/settings-types.js";
import { isFloatDType, type DType, type TensorType } from "../graph/types.js";

export function computeDType(precision: Precision): DType {
  return precision === "bf16" ? "bf16" : precision === "fp16" ? "f16" : "f32";
}

export function onDevice(t: TensorType, precision: Precision): TensorType {
  if (!isFloatDType(t.dtype)) return t;
  const dtype = computeDType(precision);
  return dtype === t.dtype ? t : { dtype, shape: t.shape };
}
