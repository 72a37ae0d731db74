// Normalization kernels over the last dimension: layer_norm (biased variance, as torch) and rms_norm, each
// with an input gradient and a scale gradient that recompute the row statistics from x.
import { floats, type FloatArray } from "../tensor.js";
import { alloc, attrNum, type Kernel } from "./kernel.js";

/** Per row of x [rows, d]: mean and 1/√(var + eps) (layer_norm) or 0 and 1/√(mean(x²) + eps) (rms_norm). */
function rowStats(x: FloatArray, d: number, eps: number, centered: boolean): { mean: Float64Array; rstd: Float64Array } {
  const rows = x.length / d;
  const mean = new Float64Array(rows);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let mu = 0;
    if (centered) {
      for (let c = 0; c < d; c++) mu += x[r * d + c]!;
      mu /= d;
    }
    let v = 0;
    for (let c = 0; c < d; c++) v += (x[r * d + c]! - mu) ** 2;
    mean[r] = mu;
    rstd[r] = 1 / Math.sqrt(v / d + eps);
  }
  return { mean, rstd };
}

function normForward(centered: boolean): Kernel {
  return ([x, w, b], attrs, ctx) => {
    const d = x!.shape[x!.shape.length - 1]!;
    const xd = floats(x!);
    const { mean, rstd } = rowStats(xd, d, attrNum(attrs, "eps"), centered);
    const [wd, bd] = [floats(w!), b ? floats(b) : undefined];
    const out = alloc(ctx, x!.shape);
    for (let k = 0; k < xd.length; k++) {
      const r = Math.floor(k / d);
      const c = k % d;
      out.data[k] = (xd[k]! - mean[r]!) * rstd[r]! * wd[c]! + (bd ? bd[c]! : 0);
    }
    return [out];
  };
}

/**
 * dx from g = dy·w and x̂ = (x − mean)·rstd: layer_norm dx = rstd·(g − mean(g) − x̂·mean(g·x̂));
 * rms_norm (no centering) dx = rstd·(g − x̂·mean(g·x̂)).
 */
function normGradInput(centered: boolean): Kernel {
  return ([dy, x, w], attrs, ctx) => {
    const d = x!.shape[x!.shape.length - 1]!;
    const [g, xd, wd] = [floats(dy!), floats(x!), floats(w!)];
    const { mean, rstd } = rowStats(xd, d, attrNum(attrs, "eps"), centered);
    const out = alloc(ctx, x!.shape);
    for (let r = 0; r < mean.length; r++) {
      let sg = 0;
      let sgx = 0;
      for (let c = 0; c < d; c++) {
        const gi = g[r * d + c]! * wd[c]!;
        sg += gi;
        sgx += gi * (xd[r * d + c]! - mean[r]!) * rstd[r]!;
      }
      const [mg, mgx] = [centered ? sg / d : 0, sgx / d];
      for (let c = 0; c < d; c++) {
        const xh = (xd[r * d + c]! - mean[r]!) * rstd[r]!;
        out.data[r * d + c] = rstd[r]! * (g[r * d + c]! * wd[c]! - mg - xh * mgx);
      }
    }
    return [out];
  };
}

/** dw = Σ_rows dy·x̂. */
function normGradWeight(centered: boolean): Kernel {
  return ([dy, x], attrs, ctx) => {
    const d = x!.shape[x!.shape.length - 1]!;
    const [g, xd] = [floats(dy!), floats(x!)];
    const { mean, rstd } = rowStats(xd, d, attrNum(attrs, "eps"), centered);
    const acc = new Float64Array(d);
    for (let k = 0; k < xd.length; k++) {
      const r = Math.floor(k / d);
      acc[k % d] += g[k]! * (xd[k]! - mean[r]!) * rstd[r]!;
    }
    const out = alloc(ctx, [d]);
    out.data.set(acc);
    return [out];
  };
}

export const normKernels: Record<string, Kernel> = {
  layer_norm: normForward(true),
  layer_norm_grad_input: normGradInput(true),
  layer_norm_grad_weight: normGradWeight(true),
  rms_norm: normForward(false),
  rms_norm_grad_input: normGradInput(false),
  rms_norm_grad_weight: normGradWeight(false),
};
