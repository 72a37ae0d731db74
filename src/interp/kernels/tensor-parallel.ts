// Kernels of the tensor-parallel ops. The per-rank ones (tp_copy, tp_slice) run in any interpreter; the
// collectives and the vocabulary-parallel loss see every rank of their group at once, so they are group
// kernels, which only the lockstep interpreter of a tensor-parallel group (src/interp/tensor-parallel.ts)
// calls: the reference the native runtime's tensor-parallel execution is held to.
import type { Attrs } from "../../graph/types.js";
import { partsOf } from "../../graph/ops/tensor-parallel-rules.js";
import { floats, type Tensor } from "../tensor.js";
import { alloc, type Kernel, type KernelContext } from "./kernel.js";
import { lossKernels } from "./loss.js";

/** Rank by rank: every rank's operands in, every rank's outputs out (same order). */
export type GroupKernel = (inputs: readonly (readonly Tensor[])[], attrs: Attrs, ctx: KernelContext) => Tensor[][];

function lastDim(t: Tensor): number {
  return t.shape[t.shape.length - 1]!;
}

/** Rank k's columns [k·n, (k+1)·n) of a tensor whose last dimension is parts·n. */
function sliceLast(t: Tensor, k: number, parts: number, ctx: KernelContext): Tensor {
  const whole = lastDim(t);
  const n = whole / parts;
  const out = alloc(ctx, [...t.shape.slice(0, -1), n]);
  const src = floats(t);
  for (let r = 0; r < src.length / whole; r++) out.data.set(src.subarray(r * whole + k * n, r * whole + (k + 1) * n), r * n);
  return out;
}

/** The ranks' slices joined along the last dimension, in rank order. */
function joinLast(parts: readonly Tensor[], ctx: KernelContext): Tensor {
  const n = lastDim(parts[0]!);
  const whole = n * parts.length;
  const out = alloc(ctx, [...parts[0]!.shape.slice(0, -1), whole]);
  parts.forEach((p, k) => {
    const src = floats(p);
    for (let r = 0; r < src.length / n; r++) out.data.set(src.subarray(r * n, (r + 1) * n), r * whole + k * n);
  });
  return out;
}

/** Every rank gets its own buffer, as on devices: a later in-place write on one rank leaves the others'. */
function copyOf(t: Tensor, ctx: KernelContext): Tensor {
  const out = alloc(ctx, t.shape);
  out.data.set(floats(t));
  return out;
}

function needsGroup(op: string): Kernel {
  return (_inputs, attrs) => {
    if (partsOf(attrs) === 1) throw new Error(`internal: ${op} without a tensor-parallel group`);
    throw new Error(`internal: ${op} runs over its tensor-parallel group: run the graph with runTensorParallelOps`);
  };
}

export const tensorParallelKernels: Record<string, Kernel> = {
  tp_copy: ([x], _attrs, ctx) => {
    const out = alloc(ctx, x!.shape);
    out.data.set(floats(x!));
    return [out];
  },
  tp_slice: ([x], attrs, ctx) => [sliceLast(x!, ctx.tensorRank ?? 0, partsOf(attrs), ctx)],
  tp_all_reduce: needsGroup("tp_all_reduce"),
  tp_all_gather: needsGroup("tp_all_gather"),
};

export const GROUP_KERNELS: Readonly<Record<string, GroupKernel>> = {
  // Summed in rank order, so every rank gets the same bits (as a ring all-reduce's fixed order would).
  tp_all_reduce: (inputs, _attrs, ctx) => {
    const out = alloc(ctx, inputs[0]![0]!.shape);
    for (const [x] of inputs) {
      const d = floats(x!);
      for (let i = 0; i < d.length; i++) out.data[i] += d[i]!;
    }
    return inputs.map((_, k) => [k === 0 ? out : copyOf(out, ctx)]);
  },
  tp_all_gather: (inputs, _attrs, ctx) => {
    const whole = joinLast(inputs.map(([x]) => x!), ctx);
    return inputs.map((_, k) => [k === 0 ? whole : copyOf(whole, ctx)]);
  },
  // Vocabulary-parallel loss: the same value as the whole logits' cross-entropy on every rank.
  cross_entropy: (inputs, _attrs, ctx) => {
    const logits = joinLast(inputs.map(([l]) => l!), ctx);
    const loss = lossKernels.cross_entropy!([logits, inputs[0]![1]!], {}, ctx);
    return inputs.map((_, k) => (k === 0 ? loss : loss.map((t) => copyOf(t, ctx))));
  },
  cross_entropy_grad: (inputs, attrs, ctx) => {
    const logits = joinLast(inputs.map(([, l]) => l!), ctx);
    const [dloss, , targets] = inputs[0]!;
    const [grad] = lossKernels.cross_entropy_grad!([dloss!, logits, targets!], {}, { ...ctx, outShapes: [logits.shape] });
    return inputs.map((_, k) => [sliceLast(grad!, k, partsOf(attrs), ctx)]);
  },
};
