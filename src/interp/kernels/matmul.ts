// Matrix kernels: batched matmul with broadcast batch dims, and linear with its two gradients
// (weights in PyTorch's [out, in] layout). Sums run in double precision.
import { floats, sizeOf, type FloatArray } from "../tensor.js";
import { broadcastIndex } from "./broadcast.js";
import { alloc, type Kernel } from "./kernel.js";

/** out[n×m] (+)= a[n×k] · b[k×m] at the given offsets; `bT` reads b as [m×k] (b's transpose). */
export function gemm(
  out: FloatArray, oOff: number,
  a: FloatArray, aOff: number,
  b: FloatArray, bOff: number,
  n: number, k: number, m: number,
  bT = false,
): void {
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += a[aOff + i * k + p]! * (bT ? b[bOff + j * k + p]! : b[bOff + p * m + j]!);
      out[oOff + i * m + j] = s;
    }
  }
}

export const matmulKernels: Record<string, Kernel> = {
  matmul: ([a, b], _attrs, ctx) => {
    const shape = ctx.outShapes[0]!;
    const out = alloc(ctx, shape);
    const [ra, rb] = [a!.shape.length, b!.shape.length];
    const [n, k, m] = [a!.shape[ra - 2]!, a!.shape[ra - 1]!, b!.shape[rb - 1]!];
    const batch = shape.slice(0, -2);
    const ia = broadcastIndex(a!.shape.slice(0, -2), batch);
    const ib = broadcastIndex(b!.shape.slice(0, -2), batch);
    const [ad, bd] = [floats(a!), floats(b!)];
    for (let t = 0; t < sizeOf(batch); t++) gemm(out.data, t * n * m, ad, ia[t]! * n * k, bd, ib[t]! * k * m, n, k, m);
    return [out];
  },
  // y = x·Wᵀ + b over the last dim.
  linear: ([x, w, bias], _attrs, ctx) => {
    const [outF, inF] = [w!.shape[0]!, w!.shape[1]!];
    const rows = sizeOf(x!.shape) / inF;
    const out = alloc(ctx, ctx.outShapes[0]!);
    gemm(out.data, 0, floats(x!), 0, floats(w!), 0, rows, inF, outF, true);
    if (bias) {
      const bd = floats(bias);
      for (let r = 0; r < rows; r++) for (let o = 0; o < outF; o++) out.data[r * outF + o] += bd[o]!;
    }
    return [out];
  },
  // dx = dy·W: [rows, out] × [out, in].
  linear_grad_input: ([dy, w], _attrs, ctx) => {
    const [outF, inF] = [w!.shape[0]!, w!.shape[1]!];
    const rows = sizeOf(dy!.shape) / outF;
    const out = alloc(ctx, ctx.outShapes[0]!);
    gemm(out.data, 0, floats(dy!), 0, floats(w!), 0, rows, outF, inF);
    return [out];
  },
  // dW = dyᵀ·x: Σ_rows dy[r, o]·x[r, i].
  linear_grad_weight: ([dy, x], _attrs, ctx) => {
    const [outF, inF] = ctx.outShapes[0]! as [number, number];
    const rows = sizeOf(dy!.shape) / outF;
    const out = alloc(ctx, [outF, inF]);
    const [g, xd] = [floats(dy!), floats(x!)];
    for (let o = 0; o < outF; o++) {
      for (let i = 0; i < inF; i++) {
        let s = 0;
        for (let r = 0; r < rows; r++) s += g[r * outF + o]! * xd[r * inF + i]!;
        out.data[o * inF + i] = s;
      }
    }
    return [out];
  },
};
