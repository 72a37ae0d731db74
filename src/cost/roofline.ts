// Roofline time of one op's forward or backward on one device: max(FLOPs / achievable peak for its dtype and
// unit, bytes / achievable memory bandwidth) plus one kernel launch; the first term that wins names the bound.
import type { ComputeUnit, OpCost } from "../graph/op-cost.js";
import type { DType } from "../graph/types.js";
import type { DeviceProfile, PeakFormat } from "./profile.js";

/** The work one kernel (or fused group) asks of a device. */
export interface Work {
  readonly flops: number;
  readonly bytes: number;
  /** The dtype the arithmetic runs in (the op's operands on the device). */
  readonly dtype: DType;
  readonly unit: ComputeUnit;
}

export interface RooflineEstimate {
  readonly seconds: number;
  readonly computeSeconds: number;
  readonly memorySeconds: number;
  /** `none` for work that moves nothing and computes nothing (a view), which costs no launch either. */
  readonly bound: "compute" | "memory" | "none";
}

/**
 * Which peak bounds the work. Matrix work runs at its dtype's rate; f32 matmuls at the plain fp32 rate, not
 * tf32, because PyTorch (the reference our parity tests use) keeps tf32 off for matmuls by default since 1.12.
 * Vector work runs on the fp32 units whatever the storage dtype (bf16 is widened in registers).
 */
export function peakFormat(dtype: DType, unit: ComputeUnit): PeakFormat {
  if (unit === "vector") return "fp32";
  return dtype === "bf16" ? "bf16" : dtype === "f16" ? "fp16" : "fp32";
}

export function roofline(work: Work, device: DeviceProfile): RooflineEstimate {
  if (work.flops === 0 && work.bytes === 0) return { seconds: 0, computeSeconds: 0, memorySeconds: 0, bound: "none" };
  const fraction = work.unit === "matrix" ? device.achievable.matmul : device.achievable.vector;
  const computeSeconds = work.flops / (device.peakFlops[peakFormat(work.dtype, work.unit)] * fraction);
  const memorySeconds = work.bytes / (device.memory.bandwidth * device.achievable.memory);
  return {
    seconds: Math.max(computeSeconds, memorySeconds) + device.launchOverhead,
    computeSeconds,
    memorySeconds,
    bound: computeSeconds >= memorySeconds ? "compute" : "memory",
  };
}

export function forwardWork(cost: OpCost, dtype: DType): Work {
  return { flops: cost.forwardFlops, bytes: cost.bytesRead + cost.bytesWritten, dtype, unit: cost.unit };
}

/**
 * The backward as one piece of work: both gradient parts' FLOPs, and twice the forward's bytes — a backward
 * reads what the forward read (the saved operands and the weights) plus the output gradient, and writes a
 * gradient for each operand, which for a linear layer is exactly 2× the forward traffic (dX, dW, 2·dY, X, W
 * versus X, W, Y) and for elementwise ops a slight overestimate (1.5×).
 */
export function backwardWork(cost: OpCost, dtype: DType): Work {
  return {
    flops: cost.backwardFlops.input + cost.backwardFlops.weight,
    bytes: 2 * (cost.bytesRead + cost.bytesWritten),
    dtype,
    unit: cost.unit,
  };
}
