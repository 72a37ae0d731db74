// Softmax along any dimension (max-subtracted) and its gradient from the output.
import { floats } from "../tensor.js";
import { alloc, attrNum, axisOf, type Kernel } from "./kernel.js";

/** The tensor as [outer, n, inner] around the axis. */
function around(shape: readonly number[], axis: number): [number, number, number] {
  const a = axisOf(axis, shape.length);
  const outer = shape.slice(0, a).reduce((p, d) => p * d, 1);
  const inner = shape.slice(a + 1).reduce((p, d) => p * d, 1);
  return [outer, shape[a]!, inner];
}

export const softmaxKernels: Record<string, Kernel> = {
  softmax: ([x], attrs, ctx) => {
    const [outer, n, inner] = around(x!.shape, attrNum(attrs, "dim"));
    const xd = floats(x!);
    const out = alloc(ctx, x!.shape);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < inner; j++) {
        const at = (i: number) => (o * n + i) * inner + j;
        let max = -Infinity;
        for (let i = 0; i < n; i++) max = Math.max(max, xd[at(i)]!);
        let sum = 0;
        for (let i = 0; i < n; i++) sum += Math.exp(xd[at(i)]! - max);
        for (let i = 0; i < n; i++) out.data[at(i)] = Math.exp(xd[at(i)]! - max) / sum;
      }
    }
    return [out];
  },
  // dx = y·(dy − Σ dy·y)
  softmax_grad: ([dy, y], attrs, ctx) => {
    const [outer, n, inner] = around(y!.shape, attrNum(attrs, "dim"));
    const [g, yd] = [floats(dy!), floats(y!)];
    const out = alloc(ctx, y!.shape);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < inner; j++) {
        const at = (i: number) => (o * n + i) * inner + j;
        let dot = 0;
        for (let i = 0; i < n; i++) dot += g[at(i)]! * yd[at(i)]!;
        for (let i = 0; i < n; i++) out.data[at(i)] = yd[at(i)]! * (g[at(i)]! - dot);
      }
    }
    return [out];
  },
};
