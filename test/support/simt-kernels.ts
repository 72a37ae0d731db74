// What the CUDA kernel tests share: random operands, one op run on the CPU and on the emulated CUDA device
// ("simt") on the same operands, the comparison of their outputs, 16-bit operands rounded by the CPU's own cast,
// and attention's operands for a case.
import { expect } from "vitest";
import { runNativeKernel, type NativeAttrs, type NativeData, type NativeOperand, type NativeOutput } from "../../src/native/binding.js";
import { rng } from "./prng.js";

export const SIMT = "simt" as const;

/** Random f32 values in [-scale, scale). */
export function floats(shape: readonly number[], seed: number, scale = 2): NativeOperand {
  const rand = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return { shape, data: Float32Array.from({ length: n }, () => (rand() * 2 - 1) * scale) };
}

/** One op's outputs on the CPU and on the emulated CUDA device. */
export function both(op: string, inputs: NativeOperand[], attrs: NativeAttrs, outputs: NativeOutput[]): [NativeData[], NativeData[]] {
  return [runNativeKernel(op, inputs, attrs, outputs), runNativeKernel(op, inputs, attrs, outputs, { device: SIMT })];
}

/** Every element within atol + rtol·|cpu|; NaN where the CPU has NaN, the same infinity where it has one.
 *  `names`: what the two sides are called in a failure (the reference first). */
export function expectClose(cpu: NativeData[], cuda: NativeData[], rtol: number, atol: number, names: readonly [string, string] = ["cpu", "cuda"]): void {
  expect(cuda.length).toBe(cpu.length);
  cpu.forEach((c, i) => {
    const g = cuda[i]!;
    expect(g.length).toBe(c.length);
    for (let k = 0; k < c.length; k++) {
      const want = c[k]!, got = g[k]!;
      if (Number.isNaN(want)) expect(got, `output ${i}[${k}]`).toBeNaN();
      else if (!Number.isFinite(want)) expect(got, `output ${i}[${k}]`).toBe(want);
      else if (!(Math.abs(want - got) <= atol + rtol * Math.abs(want))) throw new Error(`output ${i}[${k}]: ${names[0]} ${want}, ${names[1]} ${got}`);
    }
  });
}

/** A 16-bit operand's values as f32 (the CPU's cast). */
export function widen(op: NativeOperand): Float32Array {
  return runNativeKernel("fsm_cast", [op], {}, [{ shape: op.shape, dtype: "f32" }])[0] as Float32Array;
}

/** An operand stored as bf16 or f16 (rounded on the CPU by fsm_cast), and the f32 values it holds. */
export function narrow(op: NativeOperand, dtype: "bf16" | "f16"): { half: NativeOperand; wide: NativeOperand } {
  const bits = runNativeKernel("fsm_cast", [op], {}, [{ shape: op.shape, dtype }])[0]!;
  const half = { shape: op.shape, data: bits, dtype };
  return { half, wide: { shape: op.shape, data: widen(half) } };
}

export interface AttentionCase {
  B: number;
  S: number;
  heads: number;
  kv: number;
  hd: number;
  causal: boolean;
  rope: boolean;
  bias: boolean;
}

export function attentionName(c: AttentionCase): string {
  return `B ${c.B} S ${c.S} heads ${c.heads}/${c.kv} hd ${c.hd}${c.causal ? " causal" : ""}${c.rope ? " rope" : ""}${c.bias ? " bias" : ""}`;
}

/** attention's and attention_grad_input's operands for a case (each made by `store` from random f32 values),
 *  weights at the scale of a real init; d the model width, W the packed projection's. */
export function attentionOperands<T>(c: AttentionCase, seed: number, store: (op: NativeOperand) => T) {
  const d = c.heads * c.hd, W = (c.heads + 2 * c.kv) * c.hd, ws = 1 / Math.sqrt(d);
  const x = store(floats([c.B, c.S, d], seed, 1.5)), wqkv = store(floats([W, d], seed + 1, 1.5 * ws)), bqkv = store(floats([W], seed + 2, 0.5));
  const wproj = store(floats([d, d], seed + 3, ws)), bproj = store(floats([d], seed + 4, 0.5)), dy = store(floats([c.B, c.S, d], seed + 5));
  const attrs = { heads: c.heads, kv_heads: c.kv, causal: c.causal, rope: c.rope, bias: c.bias };
  const forward = c.bias ? [x, wqkv, bqkv, wproj, bproj] : [x, wqkv, wproj];
  const backward = c.bias ? [dy, x, wqkv, bqkv, wproj] : [dy, x, wqkv, wproj];
  return { attrs, forward, backward, d, W };
}
