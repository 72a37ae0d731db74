// Loss kernels: cross-entropy (mean over rows, like torch's default reduction) and mean squared error,
// with their gradients scaled by the incoming scalar gradient.
import { floats, ints } from "../tensor.js";
import { alloc, scalar, type Kernel } from "./kernel.js";

function checkTarget(t: number, v: number): void {
  if (!(t >= 0 && t < v)) throw new Error(`cross_entropy target ${t} is out of range [0, ${v})`);
}

/** log Σ exp over one row of logits, max-subtracted. */
function logSumExp(x: ArrayLike<number>, off: number, v: number): number {
  let max = -Infinity;
  for (let c = 0; c < v; c++) max = Math.max(max, x[off + c]!);
  let s = 0;
  for (let c = 0; c < v; c++) s += Math.exp(x[off + c]! - max);
  return max + Math.log(s);
}

export const lossKernels: Record<string, Kernel> = {
  cross_entropy: ([logits, targets], _attrs, ctx) => {
    const v = logits!.shape[logits!.shape.length - 1]!;
    const [x, t] = [floats(logits!), ints(targets!, "targets")];
    let sum = 0;
    for (let r = 0; r < t.length; r++) {
      checkTarget(t[r]!, v);
      sum += logSumExp(x, r * v, v) - x[r * v + t[r]!]!;
    }
    return [scalar(ctx, sum / t.length)];
  },
  // (softmax − onehot) · dloss / rows
  cross_entropy_grad: ([dloss, logits, targets], _attrs, ctx) => {
    const v = logits!.shape[logits!.shape.length - 1]!;
    const [x, t] = [floats(logits!), ints(targets!, "targets")];
    const scale = floats(dloss!)[0]! / t.length;
    const out = alloc(ctx, logits!.shape);
    for (let r = 0; r < t.length; r++) {
      checkTarget(t[r]!, v);
      const lse = logSumExp(x, r * v, v);
      for (let c = 0; c < v; c++) out.data[r * v + c] = (Math.exp(x[r * v + c]! - lse) - (c === t[r] ? 1 : 0)) * scale;
    }
    return [out];
  },
  mse_loss: ([a, b], _attrs, ctx) => {
    const [ad, bd] = [floats(a!), floats(b!)];
    let s = 0;
    for (let k = 0; k < ad.length; k++) s += (ad[k]! - bd[k]!) ** 2;
    return [scalar(ctx, s / ad.length)];
  },
  // 2·(a − b)·dloss / numel
  mse_loss_grad: ([dloss, a, b], _attrs, ctx) => {
    const [ad, bd] = [floats(a!), floats(b!)];
    const scale = (2 * floats(dloss!)[0]!) / ad.length;
    const out = alloc(ctx, a!.shape);
    for (let k = 0; k < ad.length; k++) out.data[k] = (ad[k]! - bd[k]!) * scale;
    return [out];
  },
};
