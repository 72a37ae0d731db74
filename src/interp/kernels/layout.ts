// Layout kernels: reshape (same elements), transpose (two dims swapped) and sum_to (un-broadcasting).
import { floats } from "../tensor.js";
import { broadcastIndex, stridesOf } from "./broadcast.js";
import { alloc, attrNum, axisOf, type Kernel } from "./kernel.js";

export const layoutKernels: Record<string, Kernel> = {
  // Row-major data does not move; the copy keeps outputs independent of operands.
  reshape: ([x], _attrs, ctx) => {
    const out = alloc(ctx, ctx.outShapes[0]!);
    out.data.set(floats(x!));
    return [out];
  },
  transpose: ([x], attrs, ctx) => {
    const rank = x!.shape.length;
    const [a, b] = [axisOf(attrNum(attrs, "dim0"), rank), axisOf(attrNum(attrs, "dim1"), rank)];
    const shape = [...x!.shape];
    [shape[a], shape[b]] = [shape[b]!, shape[a]!];
    // Walk the output in order; the input offset moves by the input stride of the swapped dim.
    const inSt = stridesOf(x!.shape);
    [inSt[a], inSt[b]] = [inSt[b]!, inSt[a]!];
    const out = alloc(ctx, shape);
    const xd = floats(x!);
    const ctr = new Array<number>(rank).fill(0);
    let cur = 0;
    for (let k = 0; k < out.data.length; k++) {
      out.data[k] = xd[cur]!;
      for (let d = rank - 1; d >= 0; d--) {
        ctr[d]!++;
        cur += inSt[d]!;
        if (ctr[d]! < shape[d]!) break;
        cur -= inSt[d]! * shape[d]!;
        ctr[d] = 0;
      }
    }
    return [out];
  },
  sum_to: ([x], _attrs, ctx) => {
    const shape = ctx.outShapes[0]!;
    const out = alloc(ctx, shape);
    const idx = broadcastIndex(shape, x!.shape);
    const xd = floats(x!);
    // Sum in double precision whatever the float kind, like the other reductions here.
    const acc = new Float64Array(out.data.length);
    for (let k = 0; k < xd.length; k++) acc[idx[k]!] += xd[k]!;
    out.data.set(acc);
    return [out];
  },
};
