// Cost rules shared by the op entries: element counts and bytes at bound symbol values, the elementwise
// families, and the FLOPs-per-element constants every op file cites (one table, so the numbers are documented
// once and the cost tests can refer to them).
import { numelAt } from "../dim.js";
import type { DimBindings, OpCost, OpCostRule } from "../op-cost.js";
import { DTYPE_BYTES, type TensorType } from "../types.js";
import { broadcastShapes } from "./shape-rules.js";

/**
 * FLOPs per element for the non-matmul ops, forward and backward (input gradient; `weight` where the op has
 * parameters). They count arithmetic the way the Megatron-LM and PaLM papers' appendices do for the parts
 * they list: one FLOP per add, multiply, compare, exp or division; transcendental functions count as one.
 * They are small next to the matmuls (under 1% of a GPT's FLOPs), so precision here matters little; the
 * roofline time of these ops is set by their bytes anyway.
 */
export const ELEMENTWISE_FLOPS = {
  /** a + b, a − b: one op; backward passes the gradient through and sums it over broadcast dims (≤ 1/elem). */
  add: { forward: 1, backward: 1 },
  sub: { forward: 1, backward: 1 },
  /** a·b; backward dA = dY·b and dB = dY·a. */
  mul: { forward: 1, backward: 2 },
  /** a / b; backward dA = dY / b (1), dB = −dY·a / b² (3). */
  div: { forward: 1, backward: 4 },
  /** x·c; backward dY·c. */
  scale: { forward: 1, backward: 1 },
  /** max(x, 0) as a compare-select; backward masks dY. */
  relu: { forward: 1, backward: 1 },
  /** x·Φ(x) = 0.5·x·(1 + erf(x/√2)): x/√2 (1), erf (a short polynomial, counted as 4), + 1 (1), ·x (1),
   *  ·0.5 (1) = 8; backward adds Φ'(x) = exp(−x²/2)/√(2π) and the product rule, about twice the forward. */
  gelu: { forward: 8, backward: 16 },
  /** x·σ(x): negate, exp, + 1, divide ≈ 4; backward σ·(1 + x·(1 − σ))·dY ≈ 8 with σ recomputed. */
  silu: { forward: 4, backward: 8 },
  /** max, subtract, exp, sum, divide per element; backward y·(dY − Σ dY·y): multiply, sum, subtract, multiply. */
  softmax: { forward: 5, backward: 4 },
  /** mean (1), subtract (1), square (1), variance sum (1), normalize (1), scale (1), shift (1); the per-row
   *  rsqrt is negligible. Backward input: dx̂ = dY·γ (1) and the two row reductions and combination (~7);
   *  weight: dγ = Σ dY·x̂ (2), dβ = Σ dY (1). */
  layer_norm: { forward: 7, backward: 8, weight: 3 },
  /** square (1), sum (1), normalize (1), scale (1); backward input ≈ 6 (two products, one reduction, combine),
   *  weight dγ = Σ dY·x̂ (2). */
  rms_norm: { forward: 4, backward: 6, weight: 2 },
  /** logits: max, subtract, exp, sum (the per-row log and target pick are negligible); backward
   *  (softmax − onehot) / N: divide by the row sum, subtract, scale. */
  cross_entropy: { forward: 4, backward: 3 },
  /** subtract, square, sum; backward 2·(pred − target)/N per element for each float operand. */
  mse_loss: { forward: 3, backward: 3 },
  /** Rotary embedding on q and k: two multiplies and an add per element, the same again backward. */
  rope: { forward: 3, backward: 3 },
  /** Attention scores scaled by 1/√(head dim). */
  attention_scale: { forward: 1, backward: 1 },
} as const;

/** Element count of a type at bound symbol values. */
export function elems(t: TensorType, b: DimBindings): number {
  return numelAt(t.shape, b);
}

export function bytesOf(t: TensorType, b: DimBindings): number {
  return elems(t, b) * DTYPE_BYTES[t.dtype];
}

export function sumBytes(types: readonly TensorType[], b: DimBindings): number {
  let n = 0;
  for (const t of types) n += bytesOf(t, b);
  return n;
}

/** 2·m·k·n: one multiply and one add per term of an [m, k] × [k, n] product. */
export function matmulFlops(m: number, k: number, n: number): number {
  return 2 * m * k * n;
}

/** Elementwise ops over broadcast operands (add, mul, gelu, ...): FLOPs per output element, bytes = every
 *  operand read once and the output written once, at the first operand's dtype (operands share it). */
export function elementwiseCost(perElement: { readonly forward: number; readonly backward: number }): OpCostRule {
  return (inputs, _attrs, b) => {
    const shape = inputs.slice(1).reduce((s, t) => (s ? broadcastShapes(s, t.shape) : undefined), inputs[0]!.shape as TensorType["shape"] | undefined);
    if (!shape) throw new Error(`internal: elementwise cost of operands that do not broadcast`);
    const out: TensorType = { dtype: inputs[0]!.dtype, shape };
    const n = elems(out, b);
    return {
      forwardFlops: perElement.forward * n,
      backwardFlops: { input: perElement.backward * n, weight: 0 },
      bytesRead: sumBytes(inputs, b),
      bytesWritten: bytesOf(out, b),
      unit: "vector",
    };
  };
}

/** An op that only moves data (gathers, layout changes): zero FLOPs, the given bytes. */
export function dataMovementCost(bytesRead: number, bytesWritten: number): OpCost {
  return { forwardFlops: 0, backwardFlops: { input: 0, weight: 0 }, bytesRead, bytesWritten, unit: "vector" };
}

/** Normalizations over the last dimension (layer_norm, rms_norm): operands x then the scale (and shift);
 *  FLOPs per element of x; bytes = x and the parameters read, y written. */
export function normCost(perElement: { readonly forward: number; readonly backward: number; readonly weight: number }): OpCostRule {
  return ([x, ...params], _attrs, b) => {
    const n = elems(x!, b);
    return {
      forwardFlops: perElement.forward * n,
      backwardFlops: { input: perElement.backward * n, weight: perElement.weight * n },
      bytesRead: bytesOf(x!, b) + sumBytes(params, b),
      bytesWritten: bytesOf(x!, b),
      unit: "vector",
    };
  };
}

/** Losses that reduce every element of their operands to an f32 scalar (mse_loss; cross_entropy adds its
 *  per-row log-sum-exp): FLOPs per element of the first operand, bytes = operands read, scalar written. */
export function lossCost(perElement: { readonly forward: number; readonly backward: number }, inputs: readonly TensorType[], b: DimBindings, extraWritten = 0): OpCost {
  const n = elems(inputs[0]!, b);
  return {
    forwardFlops: perElement.forward * n,
    backwardFlops: { input: perElement.backward * n, weight: 0 },
    bytesRead: sumBytes(inputs, b),
    bytesWritten: DTYPE_BYTES.f32 + extraWritten,
    unit: "vector",
  };
}
