// Elementwise kernels: the broadcasting binary ops, scale, fill, the activations and their gradients.
import type { Attrs } from "../../graph/types.js";
import { floats, type Tensor } from "../tensor.js";
import { broadcastIndex } from "./broadcast.js";
import { erf } from "./erf.js";
import { alloc, attrNum, type Kernel, type KernelContext } from "./kernel.js";

function binary(f: (a: number, b: number) => number): Kernel {
  return ([a, b], _attrs, ctx) => {
    const shape = ctx.outShapes[0]!;
    const out = alloc(ctx, shape);
    const [ad, bd] = [floats(a!), floats(b!)];
    const ia = broadcastIndex(a!.shape, shape);
    const ib = broadcastIndex(b!.shape, shape);
    for (let k = 0; k < out.data.length; k++) out.data[k] = f(ad[ia[k]!]!, bd[ib[k]!]!);
    return [out];
  };
}

function unary(f: (x: number, attrs: Attrs) => number): Kernel {
  return ([x], attrs, ctx) => {
    const out = alloc(ctx, x!.shape);
    const xd = floats(x!);
    for (let k = 0; k < xd.length; k++) out.data[k] = f(xd[k]!, attrs);
    return [out];
  };
}

/** dx = dy · f'(v) elementwise, v the forward input or output. */
function gradOf(df: (v: number) => number): Kernel {
  return ([dy, v], _attrs, ctx: KernelContext): Tensor[] => {
    const out = alloc(ctx, v!.shape);
    const [g, vd] = [floats(dy!), floats(v!)];
    for (let k = 0; k < vd.length; k++) out.data[k] = g[k]! * df(vd[k]!);
    return [out];
  };
}

const SQRT1_2 = Math.SQRT1_2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);
const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

export const elementwiseKernels: Record<string, Kernel> = {
  add: binary((a, b) => a + b),
  sub: binary((a, b) => a - b),
  mul: binary((a, b) => a * b),
  div: binary((a, b) => a / b),
  scale: unary((x, attrs) => x * attrNum(attrs, "factor")),
  fill: (_inputs, attrs, ctx) => {
    const out = alloc(ctx, ctx.outShapes[0]!);
    out.data.fill(attrNum(attrs, "value"));
    return [out];
  },
  // −dy·a/b² at the broadcast shape of a and b (dy already has it).
  div_grad_b: ([dy, a, b], _attrs, ctx) => {
    const shape = ctx.outShapes[0]!;
    const out = alloc(ctx, shape);
    const [g, ad, bd] = [floats(dy!), floats(a!), floats(b!)];
    const ia = broadcastIndex(a!.shape, shape);
    const ib = broadcastIndex(b!.shape, shape);
    for (let k = 0; k < out.data.length; k++) {
      const bv = bd[ib[k]!]!;
      out.data[k] = (-g[k]! * ad[ia[k]!]!) / (bv * bv);
    }
    return [out];
  },
  relu: unary((x) => (x <= 0 ? 0 : x)), // NaN stays NaN, as in PyTorch
  relu_grad: gradOf((y) => (y > 0 ? 1 : 0)),
  // Exact GELU x·Φ(x), Φ(x) = (1 + erf(x/√2))/2 (torch.nn.functional.gelu's default, not the tanh form).
  gelu: unary((x) => 0.5 * x * (1 + erf(x * SQRT1_2))),
  gelu_grad: gradOf((x) => 0.5 * (1 + erf(x * SQRT1_2)) + x * INV_SQRT_2PI * Math.exp(-0.5 * x * x)),
  silu: unary((x) => x * sigmoid(x)),
  silu_grad: gradOf((x) => {
    const s = sigmoid(x);
    return s * (1 + x * (1 - s));
  }),
};
