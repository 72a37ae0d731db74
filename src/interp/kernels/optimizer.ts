// Optimizer kernels, following torch.optim exactly: clipping as torch.nn.utils.clip_grad_norm_, SGD with
// momentum (dampening 0) and Nesterov, Adam with L2 weight decay, AdamW with decoupled weight decay.
import { floats } from "../tensor.js";
import { CLIP_EPS } from "../../graph/ops/clip_coef.js";
import { alloc, attrBool, attrNum, scalar, type Kernel } from "./kernel.js";

export const optimizerKernels: Record<string, Kernel> = {
  sum_squares: ([x], _attrs, ctx) => {
    let s = 0;
    for (const v of floats(x!)) s += v * v;
    return [scalar(ctx, s)];
  },
  global_norm: (sums, _attrs, ctx) => {
    let s = 0;
    for (const t of sums) s += floats(t)[0]!;
    return [scalar(ctx, Math.sqrt(s))];
  },
  clip_coef: ([norm], attrs, ctx) => [scalar(ctx, Math.min(1, attrNum(attrs, "max_norm") / (floats(norm!)[0]! + CLIP_EPS)))],
  step_increment: ([step], _attrs, ctx) => [scalar(ctx, floats(step!)[0]! + 1)],

  // g = grad·clip + wd·p; buf = μ·buf + g (buf starts at 0, so the first step sets buf = g as torch does);
  // p −= lr·(nesterov ? g + μ·buf : buf), or lr·g without momentum.
  sgd_update: ([param, grad, ...rest], attrs, ctx) => {
    const [lr, mu, wd] = [attrNum(attrs, "lr"), attrNum(attrs, "momentum"), attrNum(attrs, "weight_decay")];
    const nesterov = attrBool(attrs, "nesterov");
    const buf = mu !== 0 ? floats(rest[0]!) : undefined;
    const clip = attrBool(attrs, "clip") ? floats(rest[rest.length - 1]!)[0]! : 1;
    const [p, g] = [floats(param!), floats(grad!)];
    const newP = alloc(ctx, param!.shape);
    const newBuf = alloc(ctx, param!.shape);
    for (let i = 0; i < p.length; i++) {
      const gi = g[i]! * clip + wd * p[i]!;
      let step = gi;
      if (buf) {
        const b = mu * buf[i]! + gi;
        newBuf.data[i] = b;
        step = nesterov ? gi + mu * b : b;
      }
      newP.data[i] = p[i]! - lr * step;
    }
    return buf ? [newP, newBuf] : [newP];
  },

  // t = step (already incremented); m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
  // p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + eps). Adam adds wd·p to g; AdamW first scales p by (1 − lr·wd).
  adam_update: ([param, grad, expAvg, expAvgSq, step, clipT], attrs, ctx) => {
    const [lr, b1, b2, eps, wd] = ["lr", "beta1", "beta2", "eps", "weight_decay"].map((n) => attrNum(attrs, n)) as [number, number, number, number, number];
    const decoupled = attrBool(attrs, "decoupled");
    const clip = attrBool(attrs, "clip") ? floats(clipT!)[0]! : 1;
    const t = floats(step!)[0]!;
    const [bc1, bc2] = [1 - b1 ** t, 1 - b2 ** t];
    const [p, g, m, v] = [floats(param!), floats(grad!), floats(expAvg!), floats(expAvgSq!)];
    const [newP, newM, newV] = [alloc(ctx, param!.shape), alloc(ctx, param!.shape), alloc(ctx, param!.shape)];
    for (let i = 0; i < p.length; i++) {
      let gi = g[i]! * clip;
      let pi = p[i]!;
      if (decoupled) pi *= 1 - lr * wd;
      else gi += wd * p[i]!;
      const mi = b1 * m[i]! + (1 - b1) * gi;
      const vi = b2 * v[i]! + (1 - b2) * gi * gi;
      newM.data[i] = mi;
      newV.data[i] = vi;
      newP.data[i] = pi - (lr / bc1) * (mi / (Math.sqrt(vi) / Math.sqrt(bc2) + eps));
    }
    return [newP, newM, newV];
  },
};
