// Kernels of the tensor-parallel ops. The per-rank ones (tp_copy, tp_slice) run in any interpreter; the
// collectives (tp_all_reduce, tp_all_gather, tp_seq_gather, tp_reduce_scatter) and the vocabulary-parallel
// loss see every rank of their group at once, so they are group kernels, which only the lockstep interpreter
// of a tensor-parallel group (src/interp/tensor-parallel.ts) calls: the reference the native runtime's
// tensor-parallel execution is held to.
import type { Attrs } from "../../graph/types.js";
import { axisOf, partsOf } from "../../graph/ops/tensor-parallel-rules.js";
import { aroundAxis } from "../../graph/param-split.js";
import { floats, type Tensor } from "../tensor.js";
import { alloc, type Kernel, type KernelContext } from "./kernel.js";
import { lossKernels } from "./loss.js";

/** Rank by rank: every rank's operands in, every rank's outputs out (same order). */
export type GroupKernel = (inputs: readonly (readonly Tensor[])[], attrs: Attrs, ctx: KernelContext) => Tensor[][];

/** A tensor around `axis`: the blocks before it (outer), and the elements from it on (whole), of which one
 *  rank's part is whole / parts. */
function around(t: Tensor, axis: number): { outer: number; whole: number } {
  const { outer, inner } = aroundAxis(t.shape, axis);
  return { outer, whole: t.shape[axis]! * inner };
}

/** Rank k's part [k·n, (k+1)·n) along `axis` (n = the axis's size / parts). */
function sliceAxis(t: Tensor, k: number, parts: number, axis: number, ctx: KernelContext): Tensor {
  const { outer, whole } = around(t, axis);
  const n = whole / parts;
  const out = alloc(ctx, t.shape.map((d, i) => (i === axis ? d / parts : d)));
  const src = floats(t);
  for (let r = 0; r < outer; r++) out.data.set(src.subarray(r * whole + k * n, r * whole + (k + 1) * n), r * n);
  return out;
}

/** The ranks' parts joined along `axis`, in rank order. */
function joinAxis(parts: readonly Tensor[], axis: number, ctx: KernelContext): Tensor {
  const { outer, whole: n } = around(parts[0]!, axis);
  const whole = n * parts.length;
  const out = alloc(ctx, parts[0]!.shape.map((d, i) => (i === axis ? d * parts.length : d)));
  parts.forEach((p, k) => {
    const src = floats(p);
    for (let r = 0; r < outer; r++) out.data.set(src.subarray(r * n, (r + 1) * n), r * whole + k * n);
  });
  return out;
}

/** Rank by rank, the same sum of every rank's operand (in rank order: every rank gets the same bits). */
function sumOfRanks(inputs: readonly (readonly Tensor[])[], ctx: KernelContext): Tensor {
  const out = alloc(ctx, inputs[0]![0]!.shape);
  for (const [x] of inputs) {
    const d = floats(x!);
    for (let i = 0; i < d.length; i++) out.data[i] += d[i]!;
  }
  return out;
}

const lastAxis = (t: Tensor): number => t.shape.length - 1;

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
  tp_slice: ([x], attrs, ctx) => [sliceAxis(x!, ctx.tensorRank ?? 0, partsOf(attrs), axisOf(attrs, x!.shape.length), ctx)],
  tp_all_reduce: needsGroup("tp_all_reduce"),
  tp_all_gather: needsGroup("tp_all_gather"),
  tp_seq_gather: needsGroup("tp_seq_gather"),
  tp_reduce_scatter: needsGroup("tp_reduce_scatter"),
};

/** All-gather along the op's axis: every rank gets the whole. */
const gather: GroupKernel = (inputs, attrs, ctx) => {
  const x = inputs[0]![0]!;
  const whole = joinAxis(inputs.map(([t]) => t!), axisOf(attrs, x.shape.length), ctx);
  return inputs.map((_, k) => [k === 0 ? whole : copyOf(whole, ctx)]);
};

export const GROUP_KERNELS: Readonly<Record<string, GroupKernel>> = {
  // Summed in rank order, so every rank gets the same bits (as a ring all-reduce's fixed order would).
  tp_all_reduce: (inputs, _attrs, ctx) => {
    const out = sumOfRanks(inputs, ctx);
    return inputs.map((_, k) => [k === 0 ? out : copyOf(out, ctx)]);
  },
  tp_all_gather: gather,
  tp_seq_gather: gather,
  tp_reduce_scatter: (inputs, attrs, ctx) => {
    const sum = sumOfRanks(inputs, ctx);
    const axis = axisOf(attrs, sum.shape.length);
    return inputs.map((_, k) => [sliceAxis(sum, k, partsOf(attrs), axis, ctx)]);
  },
  // Vocabulary-parallel loss: the same value as the whole logits' cross-entropy on every rank.
  cross_entropy: (inputs, _attrs, ctx) => {
    const logits = joinAxis(inputs.map(([l]) => l!), lastAxis(inputs[0]![0]!), ctx);
    const loss = lossKernels.cross_entropy!([logits, inputs[0]![1]!], {}, ctx);
    return inputs.map((_, k) => (k === 0 ? loss : loss.map((t) => copyOf(t, ctx))));
  },
  cross_entropy_grad: (inputs, attrs, ctx) => {
    const logits = joinAxis(inputs.map(([, l]) => l!), lastAxis(inputs[0]![1]!), ctx);
    const [dloss, , targets] = inputs[0]!;
    const [grad] = lossKernels.cross_entropy_grad!([dloss!, logits, targets!], {}, { ...ctx, outShapes: [logits.shape] });
    return inputs.map((_, k) => [sliceAxis(grad!, k, partsOf(attrs), lastAxis(grad!), ctx)]);
  },
};
