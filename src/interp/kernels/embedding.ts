// Lookup kernels: positions, embedding and its weight gradient (a scatter-add).
import { floats, ints, sizeOf } from "../tensor.js";
import { alloc, attrNum, type Kernel } from "./kernel.js";

function checkId(id: number, num: number): void {
  if (!(id >= 0 && id < num)) throw new Error(`embedding index ${id} is out of range [0, ${num})`);
}

export const embeddingKernels: Record<string, Kernel> = {
  positions: (_inputs, _attrs, ctx) => {
    const n = ctx.outShapes[0]![0]!;
    const data = new Int32Array(n);
    for (let i = 0; i < n; i++) data[i] = i;
    return [{ shape: [n], data }];
  },
  embedding: ([ids, w], _attrs, ctx) => {
    const [num, dim] = [w!.shape[0]!, w!.shape[1]!];
    const out = alloc(ctx, ctx.outShapes[0]!);
    const [id, wd] = [ints(ids!, "embedding ids"), floats(w!)];
    for (let r = 0; r < id.length; r++) {
      checkId(id[r]!, num);
      out.data.set(wd.subarray(id[r]! * dim, (id[r]! + 1) * dim), r * dim);
    }
    return [out];
  },
  embedding_grad_weight: ([dy, ids], attrs, ctx) => {
    const num = attrNum(attrs, "num");
    const dim = dy!.shape[dy!.shape.length - 1]!;
    const acc = new Float64Array(num * dim);
    const [g, id] = [floats(dy!), ints(ids!, "embedding ids")];
    for (let r = 0; r < sizeOf(ids!.shape); r++) {
      checkId(id[r]!, num);
      for (let c = 0; c < dim; c++) acc[id[r]! * dim + c] += g[r * dim + c]!;
    }
    const out = alloc(ctx, [num, dim]);
    out.data.set(acc);
    return [out];
  },
};
