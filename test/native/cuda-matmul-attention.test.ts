// The CUDA device's matrix and attention kernels (device/cuda/kernels/matmul.cu, attention.cu), run on the SIMT
// emulator against the CPU kernels on the shapes that exercise their corners: every broadcast pattern of matmul
// (one strided-batched product or one per batch member), linear with and without bias, 16-bit operands, and
// the tiled attention and its gradient over every attribute, head dims from 5 to 128 and sequences that are
// not a multiple of the tile.
import { describe, expect, it } from "vitest";
import { runNativeKernel, type NativeData, type NativeOperand, type NativeOutput } from "../../src/native/binding.js";
import { attentionName as name, attentionOperands, both, expectClose as closeTo, floats, narrow, SIMT, widen, type AttentionCase } from "../support/simt-kernels.js";

const DEVICE = SIMT;
const expectClose = (cpu: NativeData[], cuda: NativeData[], rtol = 1e-4, atol = 1e-5): void => closeTo(cpu, cuda, rtol, atol);

/** attention's operands for a case in f32, with its outputs (y; dx, dqkv, context). */
function f32Attention(c: AttentionCase, seed: number) {
  const o = attentionOperands(c, seed, (op: NativeOperand) => op);
  const grads: NativeOutput[] = [{ shape: [c.B, c.S, o.d], dtype: "f32" }, { shape: [c.B, c.S, o.W], dtype: "f32" }, { shape: [c.B, c.S, o.d], dtype: "f32" }];
  return { ...o, y: grads[0]!, grads };
}






describe("CUDA matmul and linear match the CPU's", () => {
  it("matmul over every batch broadcast pattern", () => {
    // [a, b, out]: full × full, shared right, shared left, both shared, partly broadcast on either or both
    // sides (one product per batch member), a missing batch dim, odd sizes.
    const cases: number[][][] = [
      [[2, 3, 4, 5], [2, 3, 5, 6], [2, 3, 4, 6]],
      [[3, 4, 5], [5, 6], [3, 4, 6]],
      [[4, 5], [2, 5, 6], [2, 4, 6]],
      [[1, 7, 3], [1, 3, 9], [1, 7, 9]],
      [[4, 5], [5, 6], [4, 6]],
      [[2, 1, 4, 5], [1, 3, 5, 6], [2, 3, 4, 6]],
      [[2, 3, 4, 5], [3, 5, 6], [2, 3, 4, 6]],
      [[2, 1, 4, 5], [2, 3, 5, 6], [2, 3, 4, 6]],
      [[3, 1, 33, 17], [1, 2, 17, 35], [3, 2, 33, 35]],
    ];
    cases.forEach(([a, b, out], t) => {
      expectClose(...both("matmul", [floats(a!, 10 + t), floats(b!, 20 + t)], {}, [{ shape: out!, dtype: "f32" }]));
    });
  });

  it("linear with and without bias, and its gradients, on 3-D inputs", () => {
    const x = floats([2, 3, 7], 1), w = floats([5, 7], 2), bias = floats([5], 3), dy = floats([2, 3, 5], 4);
    expectClose(...both("linear", [x, w, bias], {}, [{ shape: [2, 3, 5], dtype: "f32" }]));
    expectClose(...both("linear", [x, w], {}, [{ shape: [2, 3, 5], dtype: "f32" }]));
    expectClose(...both("linear_grad_input", [dy, w], {}, [{ shape: [2, 3, 7], dtype: "f32" }]));
    expectClose(...both("linear_grad_weight", [dy, x], {}, [{ shape: [5, 7], dtype: "f32" }]));
    // Larger than a block of the bias kernel, sizes off every power of two.
    const x2 = floats([3, 37, 45], 5), w2 = floats([70, 45], 6), b2 = floats([70], 7), dy2 = floats([3, 37, 70], 8);
    expectClose(...both("linear", [x2, w2, b2], {}, [{ shape: [3, 37, 70], dtype: "f32" }]));
    expectClose(...both("linear_grad_input", [dy2, w2], {}, [{ shape: [3, 37, 45], dtype: "f32" }]));
    expectClose(...both("linear_grad_weight", [dy2, x2], {}, [{ shape: [70, 45], dtype: "f32" }]));
  });

  it("16-bit operands: the CPU's product of the same values, accumulated in f32", () => {
    for (const dtype of ["bf16", "f16"] as const) {
      const a = narrow(floats([2, 6, 9], 31), dtype), b = narrow(floats([9, 5], 32), dtype);
      const want = runNativeKernel("matmul", [a.wide, b.wide], {}, [{ shape: [2, 6, 5], dtype: "f32" }]);
      expectClose(want, runNativeKernel("matmul", [a.half, b.half], {}, [{ shape: [2, 6, 5], dtype: "f32" }], { device: DEVICE }));
      const x = narrow(floats([4, 9], 33), dtype), w = narrow(floats([5, 9], 34), dtype), bias = narrow(floats([5], 35), dtype);
      const lin = runNativeKernel("linear", [x.wide, w.wide, bias.wide], {}, [{ shape: [4, 5], dtype: "f32" }]);
      expectClose(lin, runNativeKernel("linear", [x.half, w.half, bias.half], {}, [{ shape: [4, 5], dtype: "f32" }], { device: DEVICE }));
      // A 16-bit output is the f32 result rounded once (bias added inside the product, β = 1).
      const rounded = runNativeKernel("linear", [x.half, w.half, bias.half], {}, [{ shape: [4, 5], dtype }], { device: DEVICE });
      const once = narrow({ shape: [4, 5], data: lin[0]! }, dtype).half.data;
      expect(Array.from(rounded[0]!)).toEqual(Array.from(once));
    }
  });

  it("operands of different float types are refused, not misread", () => {
    const a = narrow(floats([3, 4], 41), "bf16").half;
    expect(() => runNativeKernel("matmul", [a, floats([4, 2], 42)], {}, [{ shape: [3, 2], dtype: "f32" }], { device: DEVICE })).toThrow(/different float types/);
  });
});




// Tiles are 32 rows for head dims up to 64 and 16 beyond; S = 1 and S below, at, and past tile multiples.
const ATTENTION_CASES: AttentionCase[] = [
  { B: 2, S: 5, heads: 2, kv: 2, hd: 8, causal: true, rope: true, bias: true },
  { B: 2, S: 5, heads: 2, kv: 2, hd: 8, causal: false, rope: false, bias: false },
  { B: 1, S: 1, heads: 2, kv: 1, hd: 8, causal: true, rope: true, bias: false },
  { B: 1, S: 33, heads: 4, kv: 2, hd: 16, causal: true, rope: true, bias: false },
  { B: 1, S: 33, heads: 4, kv: 1, hd: 16, causal: false, rope: true, bias: true },
  { B: 2, S: 70, heads: 3, kv: 1, hd: 24, causal: true, rope: false, bias: true },
  { B: 1, S: 64, heads: 2, kv: 2, hd: 32, causal: true, rope: true, bias: false },
  { B: 1, S: 9, heads: 2, kv: 2, hd: 5, causal: true, rope: true, bias: true },
  { B: 1, S: 45, heads: 4, kv: 2, hd: 64, causal: true, rope: true, bias: true },
  { B: 2, S: 40, heads: 2, kv: 2, hd: 64, causal: false, rope: false, bias: false },
  { B: 1, S: 37, heads: 2, kv: 1, hd: 128, causal: true, rope: true, bias: false },
  { B: 1, S: 20, heads: 2, kv: 2, hd: 128, causal: false, rope: false, bias: true },
  { B: 1, S: 16, heads: 2, kv: 1, hd: 96, causal: false, rope: true, bias: false },
];

describe("CUDA attention matches the CPU's", () => {
  ATTENTION_CASES.forEach((c, t) => {
    it(`attention and attention_grad_input, ${name(c)}`, () => {
      const o = f32Attention(c, 100 + 10 * t);
      expectClose(...both("attention", o.forward, o.attrs, [o.y]));
      expectClose(...both("attention_grad_input", o.backward, o.attrs, o.grads));
    });
  });

  it("the gradient is the same bits every run (fixed-order sums, GQA included)", () => {
    const o = f32Attention({ B: 1, S: 35, heads: 4, kv: 2, hd: 16, causal: true, rope: true, bias: true }, 7);
    const run = () => runNativeKernel("attention_grad_input", o.backward, o.attrs, o.grads, { device: DEVICE });
    const [first, second] = [run(), run()];
    first.forEach((a, i) => expect(Array.from(second[i]!)).toEqual(Array.from(a)));
  });

  it("16-bit operands: close to the CPU on the same values", () => {
    // A head dim that is not a multiple of 16: the f32 path reads the 16-bit operands (the others take tensor
    // cores: cuda-attention-tensor-cores.test.ts).
    const c: AttentionCase = { B: 1, S: 19, heads: 2, kv: 1, hd: 8, causal: true, rope: true, bias: true };
    const o = f32Attention(c, 300);
    const f16 = o.forward.map((op) => narrow(op, "f16"));
    const want = runNativeKernel("attention", f16.map((n) => n.wide), o.attrs, [o.y]);
    expectClose(want, runNativeKernel("attention", f16.map((n) => n.half), o.attrs, [o.y], { device: DEVICE }), 5e-3, 5e-3);
    const g16 = o.backward.map((op) => narrow(op, "f16"));
    const gw = runNativeKernel("attention_grad_input", g16.map((n) => n.wide), o.attrs, o.grads);
    // dqkv is stored in W_qkv's type (dx = dqkv·W_qkv is one cuBLAS product of one type).
    const outs: NativeOutput[] = [o.grads[0]!, { ...o.grads[1]!, dtype: "f16" }, o.grads[2]!];
    const got = runNativeKernel("attention_grad_input", g16.map((n) => n.half), o.attrs, outs, { device: DEVICE });
    expectClose(gw, [got[0]!, widen({ shape: outs[1]!.shape, data: got[1]!, dtype: "f16" }), got[2]!], 5e-3, 5e-3);
  });

  it("heads split over a tensor-parallel group: a rank's heads (GQA key/value heads too), W_proj [d, C], no output bias", () => {
    // 4 query and 2 key/value heads of dim 8 (d 32) over 2 ranks: each computes 2 and 1, C = 16 wide.
    const B = 2, S = 7, heads = 4, kv = 2, hd = 8, parts = 2, d = heads * hd;
    const W = (heads / parts + (2 * kv) / parts) * hd, C = (heads / parts) * hd;
    for (const bias of [false, true]) {
      const x = floats([B, S, d], 41, 1.5), wqkv = floats([W, d], 42, 0.3), bqkv = floats([W], 43, 0.5), wproj = floats([d, C], 44, 0.2), dy = floats([B, S, d], 45);
      const attrs = { heads, kv_heads: kv, causal: true, rope: true, bias, parts };
      const forward = bias ? [x, wqkv, bqkv, wproj] : [x, wqkv, wproj];
      const backward = bias ? [dy, x, wqkv, bqkv, wproj] : [dy, x, wqkv, wproj];
      expectClose(...both("attention", forward, attrs, [{ shape: [B, S, d], dtype: "f32" }]));
      expectClose(...both("attention_grad_input", backward, attrs, [{ shape: [B, S, d], dtype: "f32" }, { shape: [B, S, W], dtype: "f32" }, { shape: [B, S, C], dtype: "f32" }]));
    }
  });

  it("shapes the kernels cannot take are refused on the host", () => {
    const o = f32Attention({ B: 1, S: 4, heads: 2, kv: 2, hd: 8, causal: true, rope: false, bias: false }, 9);
    const call = (attrs: Record<string, number | boolean>) => () => runNativeKernel("attention", o.forward, { ...o.attrs, ...attrs }, [o.y], { device: DEVICE });
    expect(call({ heads: 3 })).toThrow(/heads dividing d/);
    expect(call({ kv_heads: 3 })).toThrow(/kv_heads dividing heads/);
    expect(call({ bias: true })).toThrow(/takes 5 operands/);
    const wide = f32Attention({ B: 1, S: 2, heads: 1, kv: 1, hd: 160, causal: false, rope: false, bias: false }, 11);
    expect(() => runNativeKernel("attention", wide.forward, wide.attrs, [wide.y], { device: DEVICE })).toThrow(/head dim 160.*at most 128/);
  });
});
