// The CPU device's kernel threads (native/src/device/cpu/parallel.h) and the zeroing it skips for kernels that
// write every output element (FillsOutputs::Yes): each kernel runs as a one-device program's instruction with
// several kernel threads, over output bytes left dirty (NaN, or garbage integers), and must give the same bits
// as the kernel run inline into zeroed outputs (runNativeKernel, the host device: no kernel threads). Shapes
// are large enough that the loops split into chunks and attention's heads into tasks (some smaller ones run
// inline, which must give the same bits too), and every matrix
// product small enough (m·n·k ≤ 2¹⁸) that OpenBLAS runs it on one thread: its multi-threaded path rounds
// differently, so a larger product's bits depend on the OpenBLAS thread count, which differs between a
// program (its blasThreads) and runNativeKernel (OpenBLAS's default).
import { describe, expect, it } from "vitest";
import { createNativeCluster, runNativeKernel, type NativeAttrs, type NativeData, type NativeOperand, type NativeOutput } from "../../src/native/binding.js";
import { floats } from "../support/simt-kernels.js";

interface Case {
  name: string;
  op: string;
  inputs: NativeOperand[];
  attrs: NativeAttrs;
  outputs: NativeOutput[];
}

const f32 = (shape: readonly number[]): NativeOutput => ({ shape, dtype: "f32" });
const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

function bits(a: NativeData): number[] {
  return a instanceof Uint16Array ? Array.from(a) : Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
}

/** The call as instruction 0 of a one-device cpu program with `threads` kernel threads (its OpenBLAS threads),
 *  every output slot filled with junk first. */
async function inProgram(c: Case, threads: number): Promise<NativeData[]> {
  let offset = 0;
  const slots = [...c.inputs.map((t) => ({ shape: t.shape, dtype: t.data instanceof Int32Array ? ("i32" as const) : ("f32" as const) })), ...c.outputs].map((s) => {
    const slot = { shape: s.shape, dtype: s.dtype, offset };
    offset += Math.ceil((size(s.shape) * 4) / 256) * 256;
    return slot;
  });
  const cluster = createNativeCluster({
    device: { kind: "cpu" },
    blasThreads: threads,
    devices: [{
      arenaBytes: Math.max(offset, 256),
      slots,
      instructions: [{ stream: 0, op: c.op, inputs: c.inputs.map((_, i) => i), outputs: c.outputs.map((_, i) => c.inputs.length + i), attrs: c.attrs, waits: [] }],
    }],
  });
  c.inputs.forEach((t, i) => cluster.set(0, i, t.data));
  c.outputs.forEach((o, i) => cluster.set(0, c.inputs.length + i, o.dtype === "i32" ? new Int32Array(size(o.shape)).fill(-123456789) : new Float32Array(size(o.shape)).fill(Number.NaN)));
  await cluster.run();
  return c.outputs.map((_, i) => cluster.get(0, c.inputs.length + i));
}

/** Class ids in [0, v), a fixed pattern. */
function targets(rows: number, v: number): NativeOperand {
  return { shape: [rows], data: Int32Array.from({ length: rows }, (_, r) => (r * 37 + 11) % v) };
}

/** The norms with enough rows (and for the scale gradients, columns) to split. */
function normCases(): Case[] {
  const shape = [40, 50, 64];
  const x = floats(shape, 40, 3), dy = floats(shape, 41), w = floats([64], 42), b = floats([64], 43);
  const out: Case[] = [];
  for (const norm of ["layer_norm", "rms_norm"]) {
    const attrs = { eps: 1e-5 };
    out.push({ name: `${norm} ${JSON.stringify(shape)}`, op: norm, inputs: norm === "layer_norm" ? [x, w, b] : [x, w], attrs, outputs: [f32(shape)] });
    out.push({ name: `${norm}_grad_input ${JSON.stringify(shape)}`, op: `${norm}_grad_input`, inputs: [dy, x, w], attrs, outputs: [f32(shape)] });
    out.push({ name: `${norm}_grad_weight ${JSON.stringify(shape)}`, op: `${norm}_grad_weight`, inputs: [dy, x], attrs, outputs: [f32([64])] });
  }
  return out;
}

function cases(): Case[] {
  const big = [7, 9, 700]; // 44100 elements: chunks of the exp-heavy loops
  const huge = [3, 300, 160]; // 144000: chunks of the light loops
  const x = floats(big, 1, 6), dy = floats(big, 2), xh = floats(huge, 3, 6), yh = floats(huge, 4, 6);
  const sumTo = (from: number[], to: number[], seed: number): Case => ({ name: `sum_to ${JSON.stringify(from)} -> ${JSON.stringify(to)}`, op: "sum_to", inputs: [floats(from, seed)], attrs: {}, outputs: [f32(to)] });
  const attention = (B: number, S: number, heads: number, kv: number, hd: number, causal: boolean, rope: boolean, bias: boolean, seed: number): Case[] => {
    const d = heads * hd, W = (heads + 2 * kv) * hd, ws = 1 / Math.sqrt(d);
    const xa = floats([B, S, d], seed, 1.5), wqkv = floats([W, d], seed + 1, 1.5 * ws), bqkv = floats([W], seed + 2, 0.5);
    const wproj = floats([d, d], seed + 3, ws), bproj = floats([d], seed + 4, 0.5), dya = floats([B, S, d], seed + 5);
    const attrs = { heads, kv_heads: kv, causal, rope, bias };
    const name = `B ${B} S ${S} heads ${heads}/${kv} hd ${hd}${causal ? " causal" : ""}${rope ? " rope" : ""}${bias ? " bias" : ""}`;
    return [
      { name: `attention ${name}`, op: "attention", inputs: bias ? [xa, wqkv, bqkv, wproj, bproj] : [xa, wqkv, wproj], attrs, outputs: [f32([B, S, d])] },
      {
        name: `attention_grad_input ${name}`,
        op: "attention_grad_input",
        inputs: bias ? [dya, xa, wqkv, bqkv, wproj] : [dya, xa, wqkv, wproj],
        attrs,
        outputs: [f32([B, S, d]), f32([B, S, W]), f32([B, S, d])],
      },
    ];
  };
  const rows = [4, 50, 24];
  const w = floats([24], 30), b = floats([24], 31);
  return [
    ...["gelu", "silu", "relu"].map((op) => ({ name: op, op, inputs: [x], attrs: {}, outputs: [f32(big)] })),
    ...["gelu_grad", "silu_grad", "relu_grad"].map((op) => ({ name: op, op, inputs: [dy, x], attrs: {}, outputs: [f32(big)] })),
    { name: "relu, light chunks", op: "relu", inputs: [xh], attrs: {}, outputs: [f32(huge)] },
    ...["add", "sub", "mul", "div"].map((op) => ({ name: op, op, inputs: [xh, yh], attrs: {}, outputs: [f32(huge)] })),
    { name: "add, broadcast", op: "add", inputs: [xh, floats([160], 5)], attrs: {}, outputs: [f32(huge)] },
    { name: "scale", op: "scale", inputs: [xh], attrs: { factor: -0.3 }, outputs: [f32(huge)] },
    { name: "fill", op: "fill", inputs: [], attrs: { value: 2.5 }, outputs: [f32([5, 7])] },
    { name: "div_grad_b", op: "div_grad_b", inputs: [floats([4, 6], 6), floats([4, 6], 7), floats([6], 8)], attrs: {}, outputs: [f32([4, 6])] },
    sumTo([4096, 100], [100], 10), // columns in chunks
    sumTo([64, 64, 48], [48], 11),
    sumTo([500, 300], [500, 1], 12), // rows in chunks
    sumTo([6, 7, 5], [6, 1, 5], 13), // a middle dim
    sumTo([3, 40, 2, 30], [3, 1, 2, 1], 14), // interleaved
    sumTo([2, 3, 4], [], 9), // everything
    sumTo([30, 1, 4], [1, 4], 15),
    sumTo([2, 3, 4], [2, 3, 4], 16), // nothing summed
    sumTo([0, 4], [4], 17), // nothing to sum: zeros
    ...attention(2, 40, 4, 4, 8, true, false, true, 40), // the GPT's shape, small
    ...attention(2, 30, 6, 2, 8, true, true, false, 50), // GQA with rotary embeddings
    ...attention(3, 20, 2, 1, 16, false, false, true, 60),
    ...attention(1, 20, 2, 2, 32, true, false, true, 65), // the 867k GPT's head size
    ...attention(1, 300, 2, 1, 8, true, true, true, 70), // two blocks of query rows (the forward's tasks)
    // Work enough (over kThreadedTaskFlops) that both passes' tasks go to the kernel threads: the ones above
    // but the last are smaller and run inline.
    ...attention(2, 128, 2, 2, 8, true, false, true, 75),
    ...attention(2, 96, 4, 2, 4, true, true, false, 80), // GQA with rotary embeddings
    ...attention(3, 80, 2, 1, 8, false, false, true, 85),
    { name: "reshape", op: "reshape", inputs: [floats([6, 4], 18)], attrs: {}, outputs: [f32([4, 6])] },
    { name: "transpose", op: "transpose", inputs: [floats([3, 5, 7], 19)], attrs: { dim0: 0, dim1: 2 }, outputs: [f32([7, 5, 3])] },
    { name: "matmul", op: "matmul", inputs: [floats([2, 5, 6], 20), floats([6, 3], 21)], attrs: {}, outputs: [f32([2, 5, 3])] },
    { name: "linear", op: "linear", inputs: [floats(rows, 22), floats([16, 24], 23), floats([16], 24)], attrs: {}, outputs: [f32([4, 50, 16])] },
    { name: "linear_grad_input", op: "linear_grad_input", inputs: [floats([4, 50, 16], 25), floats([16, 24], 23)], attrs: {}, outputs: [f32(rows)] },
    { name: "linear_grad_weight", op: "linear_grad_weight", inputs: [floats([4, 50, 16], 25), floats(rows, 22)], attrs: {}, outputs: [f32([16, 24])] },
    { name: "layer_norm", op: "layer_norm", inputs: [floats(rows, 26), w, b], attrs: { eps: 1e-5 }, outputs: [f32(rows)] },
    { name: "layer_norm_grad_input", op: "layer_norm_grad_input", inputs: [floats(rows, 27), floats(rows, 26), w], attrs: { eps: 1e-5 }, outputs: [f32(rows)] },
    { name: "layer_norm_grad_weight", op: "layer_norm_grad_weight", inputs: [floats(rows, 27), floats(rows, 26)], attrs: { eps: 1e-5 }, outputs: [f32([24])] },
    { name: "rms_norm", op: "rms_norm", inputs: [floats(rows, 26), w], attrs: { eps: 1e-5 }, outputs: [f32(rows)] },
    { name: "softmax", op: "softmax", inputs: [floats(rows, 28)], attrs: { dim: 1 }, outputs: [f32(rows)] },
    { name: "softmax_grad", op: "softmax_grad", inputs: [floats(rows, 29), floats(rows, 28)], attrs: { dim: -1 }, outputs: [f32(rows)] },
    { name: "mse_loss", op: "mse_loss", inputs: [floats(rows, 26), floats(rows, 28)], attrs: {}, outputs: [f32([])] },
    { name: "positions", op: "positions", inputs: [], attrs: {}, outputs: [{ shape: [9], dtype: "i32" }] },
    { name: "embedding", op: "embedding", inputs: [{ shape: [2, 3], data: Int32Array.of(0, 4, 2, 2, 1, 3) }, floats([5, 6], 32)], attrs: {}, outputs: [f32([2, 3, 6])] },
    { name: "cross_entropy_grad", op: "cross_entropy_grad", inputs: [{ shape: [], data: Float32Array.of(0.5) }, floats([6, 10], 33), { shape: [6], data: Int32Array.of(0, 9, 3, 3, 5, 1) }], attrs: {}, outputs: [f32([6, 10])] },
    ...normCases(),
    { name: "cross_entropy", op: "cross_entropy", inputs: [floats([700, 100], 35, 4), targets(700, 100)], attrs: {}, outputs: [f32([])] },
    { name: "cross_entropy_grad", op: "cross_entropy_grad", inputs: [{ shape: [], data: Float32Array.of(-1.5) }, floats([700, 100], 35, 4), targets(700, 100)], attrs: {}, outputs: [f32([700, 100])] },
    {
      name: "adam_update",
      op: "adam_update",
      inputs: [floats([40000], 36), floats([40000], 37), floats([40000], 38, 0.1), { shape: [40000], data: (floats([40000], 39, 0.01).data as Float32Array).map(Math.abs) }, { shape: [], data: Float32Array.of(3) }],
      attrs: { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, decoupled: false, clip: false },
      outputs: [f32([40000]), f32([40000]), f32([40000])],
    },
    {
      name: "sgd_update",
      op: "sgd_update",
      inputs: [floats([40000], 36), floats([40000], 37), floats([40000], 38, 0.1)],
      attrs: { lr: 0.1, momentum: 0.9, weight_decay: 0.01, nesterov: true, clip: false },
      outputs: [f32([40000]), f32([40000])],
    },
    { name: "embedding_grad_weight (zeroed first)", op: "embedding_grad_weight", inputs: [floats([2, 3, 6], 34), { shape: [2, 3], data: Int32Array.of(0, 4, 2, 2, 1, 0) }], attrs: { num: 7 }, outputs: [f32([7, 6])] },
  ];
}

describe("CPU kernels over several kernel threads and dirty outputs give the inline kernels' bits", () => {
  for (const c of cases()) {
    it(c.name, async () => {
      const want = runNativeKernel(c.op, c.inputs, c.attrs, c.outputs);
      for (const threads of [3, 2]) {
        const got = await inProgram(c, threads);
        got.forEach((g, i) => expect(bits(g), `${threads} threads, output ${i}`).toEqual(bits(want[i]!)));
      }
    });
  }

  it("gelu's and silu's f32 formulas and their gradients keep the double formulas' special values", () => {
    const xs = Float32Array.of(0, -0, 1e-30, -1e-30, 0.5, -0.5, 3, -3, 9, -9, 13.2, -13.2, 20, -20, 88, -88, 1e30, -1e30, Infinity, -Infinity, Number.NaN);
    const x = { shape: [xs.length], data: xs };
    const ones = { shape: [xs.length], data: new Float32Array(xs.length).fill(1) };
    const phi = (v: number) => 0.5 * erfc(-v / Math.SQRT2);
    const sigmoid = (v: number) => 1 / (1 + Math.exp(-v));
    const formulas: Record<string, [(v: number) => number, (v: number) => number]> = {
      gelu: [(v) => v * phi(v), (v) => phi(v) + (Math.abs(v) > 1e10 ? v * 0 : (v * Math.exp(-0.5 * v * v)) / Math.sqrt(2 * Math.PI))],
      silu: [(v) => v * sigmoid(v), (v) => sigmoid(v) * (1 + v * (1 - sigmoid(v)))],
    };
    for (const [op, [f, df]] of Object.entries(formulas)) {
      const y = runNativeKernel(op, [x], {}, [f32([xs.length])])[0] as Float32Array;
      const g = runNativeKernel(`${op}_grad`, [ones, x], {}, [f32([xs.length])])[0] as Float32Array;
      xs.forEach((v, i) => {
        for (const [got, want] of [[y[i]!, f(v)], [g[i]!, df(v)]] as const) {
          if (Number.isNaN(want)) expect(got, `${op} x = ${v}`).toBeNaN();
          else if (!Number.isFinite(want)) expect(got, `${op} x = ${v}`).toBe(want);
          else expect(Math.abs(got - want), `${op} x = ${v}: ${got} against ${want}`).toBeLessThanOrEqual(1e-30 + 1e-6 * Math.abs(want));
        }
      });
    }
  });
});

/** erfc in double to ~1e-15 relative (continued fraction for large |x|, series for small): test-side only. */
function erfc(x: number): number {
  if (Number.isNaN(x)) return Number.NaN;
  if (x === Infinity) return 0;
  if (x < 0) return 2 - erfc(-x);
  if (x < 2) {
    // erf by its Maclaurin series.
    let term = x, sum = x;
    for (let n = 1; n < 60; n++) {
      term *= (-x * x) / n;
      sum += term / (2 * n + 1);
    }
    return 1 - (2 / Math.sqrt(Math.PI)) * sum;
  }
  // Lentz's continued fraction erfc(x) = exp(−x²)/√π · 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))).
  let f = x, c = x, d = 0;
  for (let n = 1; n < 200; n++) {
    const a = n / 2;
    d = x + a * d;
    c = x + a / c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(-x * x) / Math.sqrt(Math.PI) / f;
}
