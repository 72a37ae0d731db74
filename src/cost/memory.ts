// Model-state memory: bytes per parameter for weights, gradients and optimizer state under each precision and
// optimizer, and what one device holds under each sharding strategy (ZeRO stages 0-3, as in Rajbhandari et
// al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", §3 and Figure 1).
import type { Optimizer, Precision, ShardStrategy } from "../check/settings-types.js";

/** What memory.ts needs of an optimizer: its kind, and for SGD whether it keeps a momentum buffer. */
export type OptimizerSpec = { readonly kind: "adam" | "adamw" } | { readonly kind: "sgd"; readonly momentum: number };

export interface StateBytesPerParam {
  /** The weights the forward and backward compute with (bf16/fp16 copies under mixed precision). */
  readonly param: number;
  readonly grad: number;
  /** K in the ZeRO paper: optimizer state, including the fp32 master weights under mixed precision. */
  readonly optimizer: number;
}

/**
 * Bytes per parameter. fp32: 4-byte weights and gradients; Adam keeps two fp32 moments (K = 8), SGD one fp32
 * momentum buffer when momentum > 0 (K = 4, else 0). bf16/fp16 mixed precision: 2-byte weights the forward
 * and backward compute with, fp32 master weights in the optimizer (4 bytes: Adam K = 4 + 4 + 4 = 12, the ZeRO
 * paper's K; SGD 4 + 4 with momentum, 4 without), and gradients in `reduceDtype` (`train.reduce_dtype`): fp32 by
 * default, accumulated and reduced in fp32 as Megatron-LM does for bf16 (`accumulate_allreduce_grads_in_fp32`)
 * and FSDP2 with `reduce_dtype=float32`, so mixed-precision Adam is 2 + 4 + 12 = 18 bytes (Megatron-LM's
 * distributed-optimizer table, "bf16 param, fp32 grads"); in the 16-bit type 2 + 2 + 12 = 16 (the ZeRO paper's).
 */
export function stateBytesPerParam(precision: Precision, optimizer: OptimizerSpec | Optimizer, reduceDtype: Precision): StateBytesPerParam {
  const mixed = precision !== "fp32";
  const word = mixed ? 2 : 4;
  const master = mixed ? 4 : 0;
  const moments = optimizer.kind === "sgd" ? (optimizer.momentum > 0 ? 4 : 0) : 8;
  return { param: word, grad: reduceDtype === "fp32" ? 4 : 2, optimizer: master + moments };
}

export function totalBytesPerParam(s: StateBytesPerParam): number {
  return s.param + s.grad + s.optimizer;
}

/**
 * Model-state bytes on one device of a data-parallel group of `devices` for `params` parameters (Ψ), with
 * p, g, K the bytes per parameter above and shards of ⌈Ψ/N⌉ parameters (FSDP pads its flat parameters to
 * equal shards):
 *   none (DDP)       (p + g + K)·Ψ
 *   oss  (ZeRO-1)    (p + g)·Ψ + K·Ψ/N
 *   sddp (ZeRO-2)    p·Ψ + (g + K)·Ψ/N
 *   fsdp (ZeRO-3)    (p + g + K)·Ψ/N
 * Mixed-precision Adam (p = 2, g = 4, K = 12): 18, 6 + 12/N (Megatron-LM's distributed optimizer), 2 + 16/N and
 * 18/N bytes per parameter; with the ZeRO paper's fp16 gradients (g = 2) the same formulas give its Figure 1.
 */
export function modelStateBytes(
  params: number,
  devices: number,
  strategy: ShardStrategy,
  precision: Precision,
  optimizer: OptimizerSpec | Optimizer,
  reduceDtype: Precision,
): number {
  if (!Number.isInteger(params) || params < 0) throw new Error(`internal: parameter count must be a non-negative integer, got ${params}`);
  if (!Number.isInteger(devices) || devices < 1) throw new Error(`internal: device count must be a positive integer, got ${devices}`);
  const { param: p, grad: g, optimizer: k } = stateBytesPerParam(precision, optimizer, reduceDtype);
  const shard = Math.ceil(params / devices);
  switch (strategy) {
    case "none":
      return (p + g + k) * params;
    case "oss":
      return (p + g) * params + k * shard;
    case "sddp":
      return p * params + (g + k) * shard;
    case "fsdp":
      return (p + g + k) * shard;
  }
}
