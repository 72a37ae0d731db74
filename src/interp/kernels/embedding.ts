// Lookup kernels: positions, embedding and its weight gradient (a scatter-add).
import { floats, ints, sizeOf } from "../tensor.js";
import type { Attrs } from "../../graph/types.js";
import { partsOf } from "../../graph/ops/tensor-parallel-rules.js";
import { alloc, attrNum, type Kernel, type KernelContext } from "./kernel.js";

function checkId(id: number, num: number): void {
  if (!(id >= 0 && id < num)) throw new Error(`embedding index ${id} is out of range [0, ${num})`);
}

/** The rows of the whole table this rank holds: [first, first + rows). A vocabulary-parallel table (parts > 1,
 *  set by the tensor-parallel pass) gives rank k rows [k·rows, (k+1)·rows); ids elsewhere look up zeros
 *  here (another rank holds them, and the all-reduce that follows sums them in). */
function localRows(attrs: Attrs, rows: number, ctx: KernelContext): { first: number; whole: number } {
  const parts = partsOf(attrs);
  return { first: parts > 1 ? (ctx.tensorRank ?? 0) * rows : 0, whole: rows * parts };
}

export const embeddingKernels: Record<string, Kernel> = {
  positions: (_inputs, _attrs, ctx) => {
    const n = ctx.outShapes[0]![0]!;
    const data = new Int32Array(n);
    for (let i = 0; i < n; i++) data[i] = i;
    return [{ shape: [n], data }];
  },
  embedding: ([ids, w], attrs, ctx) => {
    const [num, dim] = [w!.shape[0]!, w!.shape[1]!];
    const { first, whole } = localRows(attrs, num, ctx);
    const out = alloc(ctx, ctx.outShapes[0]!);
    const [id, wd] = [ints(ids!, "embedding ids"), floats(w!)];
    for (let r = 0; r < id.length; r++) {
      checkId(id[r]!, whole);
      const row = id[r]! - first;
      if (row >= 0 && row < num) out.data.set(wd.subarray(row * dim, (row + 1) * dim), r * dim);
    }
    return [out];
  },
  embedding_grad_weight: ([dy, ids], attrs, ctx) => {
    const num = attrNum(attrs, "num");
    const { first, whole } = localRows(attrs, num, ctx);
    const dim = dy!.shape[dy!.shape.length - 1]!;
    const acc = new Float64Array(num * dim);
    const [g, id] = [floats(dy!), ints(ids!, "embedding ids")];
    for (let r = 0; r < sizeOf(ids!.shape); r++) {
      checkId(id[r]!, whole);
      const row = id[r]! - first;
      if (row < 0 || row >= num) continue;
      for (let c = 0; c < dim; c++) acc[row * dim + c] += g[r * dim + c]!;
    }
    const out = alloc(ctx, [num, dim]);
    out.data.set(acc);
    return [out];
  },
};
