// The CPU's fused attention and its input gradient (native/src/device/cpu/kernels/attention.cc) against the
// interpreter's kernels at shapes the training-step comparisons (kernels.test.ts, heads of 8) do not reach:
// the 867k GPT's heads of 32 (the widest register tiles), lengths and head sizes that are no multiple of a
// tile (ragged groups of rows at the causal mask's edge, narrow and single-column tails), more than one block
// of 256 query rows, grouped-query heads with rotary embeddings, no mask, and a tensor-parallel rank's heads.
// Tolerances as the step comparisons' (rtol 1e-4, atol 1e-5).
import { describe, it } from "vitest";
import { kernelFor } from "../../src/interp/kernels/index.js";
import type { Tensor } from "../../src/interp/tensor.js";
import { runNativeKernel, type NativeAttrs, type NativeOperand } from "../../src/native/binding.js";
import { attentionName, attentionOperands, expectClose, floats, type AttentionCase } from "../support/simt-kernels.js";

const RTOL = 1e-4, ATOL = 1e-5;

/** The op on the interpreter (f32 outputs) and natively, x [B, S, d] the first output's shape; every output
 *  element within tolerance. */
function expectAsInterpreter(op: string, inputs: NativeOperand[], opAttrs: NativeAttrs, outShapes: number[][]): void {
  const attrs = { ...opAttrs, d: outShapes[0]![2]! }; // the graph's attributes include the model width
  const want = kernelFor(op)(inputs as Tensor[], attrs, { outShapes, outInt: outShapes.map(() => false), float: "f32" });
  const got = runNativeKernel(op, inputs, attrs, outShapes.map((shape) => ({ shape, dtype: "f32" as const })));
  expectClose(want.map((w) => w.data as Float32Array), got, RTOL, ATOL, ["interpreter", "native"]);
}

const CASES: AttentionCase[] = [
  { B: 2, S: 64, heads: 4, kv: 4, hd: 32, causal: true, rope: false, bias: true }, // the 867k GPT's heads
  { B: 1, S: 67, heads: 4, kv: 2, hd: 64, causal: true, rope: true, bias: false },
  { B: 2, S: 37, heads: 2, kv: 1, hd: 20, causal: false, rope: true, bias: true },
  { B: 1, S: 29, heads: 3, kv: 3, hd: 12, causal: true, rope: false, bias: true },
  { B: 1, S: 300, heads: 2, kv: 1, hd: 16, causal: true, rope: true, bias: true }, // two blocks of query rows
  { B: 1, S: 270, heads: 2, kv: 2, hd: 8, causal: false, rope: false, bias: false },
  { B: 3, S: 1, heads: 2, kv: 1, hd: 8, causal: true, rope: true, bias: false },
];

describe("CPU attention matches the interpreter's", () => {
  for (const c of CASES) {
    it(attentionName(c), () => {
      const o = attentionOperands(c, 70, (op: NativeOperand) => op);
      expectAsInterpreter("attention", o.forward, o.attrs, [[c.B, c.S, o.d]]);
      expectAsInterpreter("attention_grad_input", o.backward, o.attrs, [[c.B, c.S, o.d], [c.B, c.S, o.W], [c.B, c.S, o.d]]);
    });
  }

  it("a tensor-parallel rank's heads (GQA key/value heads too), W_proj [d, C], no output bias", () => {
    // 8 query and 4 key/value heads of 32 (d 256) over 2 ranks: each computes 4 and 2, C = 128 wide.
    const B = 2, S = 45, heads = 8, kv = 4, hd = 32, parts = 2, d = heads * hd;
    const W = ((heads + 2 * kv) / parts) * hd, C = (heads / parts) * hd;
    const x = floats([B, S, d], 81, 1.5), wqkv = floats([W, d], 82, 0.1), bqkv = floats([W], 83, 0.5), wproj = floats([d, C], 84, 0.1), dy = floats([B, S, d], 85);
    const attrs = { heads, kv_heads: kv, causal: true, rope: true, bias: true, parts };
    expectAsInterpreter("attention", [x, wqkv, bqkv, wproj], attrs, [[B, S, d]]);
    expectAsInterpreter("attention_grad_input", [dy, x, wqkv, bqkv, wproj], attrs, [[B, S, d], [B, S, W], [B, S, C]]);
  });
});
