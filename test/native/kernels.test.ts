// Every native kernel against the interpreter's on real graphs: one training step of mlp, gpt-tiny (tied
// embedding, GELU, layer norm, causal attention, Adam with clipping) and a tiny Llama (GQA, rotary, RMSNorm,
// SwiGLU, AdamW, SGD variants) runs op by op in f32 with the interpreter's kernels; each op's native kernel
// gets the same operands and must give the same outputs (rtol 1e-4, atol 1e-5, as the PyTorch parity test).
import { describe, expect, it } from "vitest";
import { KERNELS, kernelFor } from "../../src/interp/kernels/index.js";
import { nativeFailure, runNativeKernel } from "../../src/native/binding.js";
import { hasNativeKernel, nativeKernel } from "../../src/native/kernels.js";
import { COMMUNICATOR_OPS } from "../../src/lower/tensor-parallel.js";
import { compareStep, STEP_CASES, trainingGraph } from "../support/kernel-step.js";

describe("native kernels match the interpreter's", () => {
  const seen = new Set<string>();
  for (const [name, overrides, batch, seq] of STEP_CASES) {
    it(`${name} ${JSON.stringify(overrides)}: every op with a native kernel agrees`, () => {
      const r = compareStep(trainingGraph(name, overrides), seq, batch);
      for (const op of r.seen) seen.add(op);
      expect(r.mismatches).toEqual([]);
      expect(r.compared).toBeGreaterThan(0);
    });
  }

  it("every op the interpreter has, the native addon has (and the models above exercise them all)", () => {
    // A tensor-parallel group's collectives are communicator calls (src/lower/tensor-parallel.ts), not kernels.
    const missing = Object.keys(KERNELS).filter((op) => !COMMUNICATOR_OPS.has(op) && !hasNativeKernel(op));
    expect(missing, `native kernels missing for: ${missing.join(", ")}`).toEqual([]);
    expect([...COMMUNICATOR_OPS].filter((op) => hasNativeKernel(op))).toEqual([]);
    // The tensor-parallel ops are compared below and run in test/runtime/tensor-parallel-run.test.ts.
    const unexercised = Object.keys(KERNELS).filter((op) => !seen.has(op) && !op.startsWith("tp_"));
    expect(unexercised, `no test model uses: ${unexercised.join(", ")}`).toEqual([]);
  });

  it("the tensor-parallel per-rank ops and split lookups agree with the interpreter's on every rank", () => {
    const x = { shape: [3, 2, 8], data: Float32Array.from({ length: 48 }, (_, i) => Math.sin(i)) };
    for (const [parts, rank] of [[2, 0], [2, 1], [4, 2]] as const) {
      const ctx = { outShapes: [[3, 2, 8 / parts]], float: "f32" as const };
      const native = nativeKernel("tp_slice")([x], { parts, tensor_rank: rank }, ctx)[0]!.data;
      const interp = kernelFor("tp_slice")([x], { parts }, { ...ctx, tensorRank: rank })[0]!.data;
      expect(Array.from(native)).toEqual(Array.from(interp));
    }
    expect(Array.from(nativeKernel("tp_copy")([x], { parts: 2 }, { outShapes: [[3, 2, 8]], float: "f32" })[0]!.data)).toEqual(Array.from(x.data));
    // A vocabulary-parallel table of 3 rows per rank (6 in all): ids of the other rank look up zeros and add nothing.
    const ids = { shape: [5], data: Int32Array.of(0, 4, 5, 2, 4) };
    const w = { shape: [3, 2], data: Float32Array.of(1, 2, 3, 4, 5, 6) };
    const dy = { shape: [5, 2], data: Float32Array.from({ length: 10 }, (_, i) => i + 1) };
    for (const rank of [0, 1]) {
      const ctx = { outShapes: [[5, 2]], float: "f32" as const };
      expect(Array.from(nativeKernel("embedding")([ids, w], { parts: 2, tensor_rank: rank }, ctx)[0]!.data)).toEqual(Array.from(kernelFor("embedding")([ids, w], { parts: 2 }, { ...ctx, tensorRank: rank })[0]!.data));
      const gctx = { outShapes: [[3, 2]], float: "f32" as const };
      const grad = nativeKernel("embedding_grad_weight")([dy, ids], { parts: 2, num: 3, tensor_rank: rank }, gctx)[0]!.data;
      expect(Array.from(grad)).toEqual(Array.from(kernelFor("embedding_grad_weight")([dy, ids], { parts: 2, num: 3 }, { ...gctx, tensorRank: rank })[0]!.data));
    }
    // Rank 1 holds rows 3..5: ids 4, 5, 4 land on its rows 1, 2, 1.
    expect(Array.from(nativeKernel("embedding")([ids, w], { parts: 2, tensor_rank: 1 }, { outShapes: [[5, 2]], float: "f32" })[0]!.data)).toEqual([0, 0, 3, 4, 5, 6, 0, 0, 3, 4]);
  });

  it("the vocabulary-parallel loss's pieces, strung together over 2 ranks by hand, give the whole loss and its gradient", () => {
    const [rows, V, parts] = [5, 8, 2];
    const local = V / parts;
    const whole = Float32Array.from({ length: rows * V }, (_, i) => Math.sin(i * 1.7) * 3);
    const targets = { shape: [rows], data: Int32Array.of(0, 3, 4, 7, 6) };
    const f32 = (shape: number[]) => ({ shape, dtype: "f32" as const });
    // Rank k holds classes [k·4, (k+1)·4) of every row.
    const slice = (k: number) => ({ shape: [rows, local], data: Float32Array.from({ length: rows * local }, (_, i) => whole[Math.floor(i / local) * V + k * local + (i % local)]!) });
    const maxes = { shape: [parts, rows], data: new Float32Array(parts * rows) };
    for (let k = 0; k < parts; k++) maxes.data.set(runNativeKernel("fsm_vocab_ce_max", [slice(k)], {}, [f32([rows])])[0] as Float32Array, k * rows);
    const sums = { shape: [2, rows], data: new Float32Array(2 * rows) };
    for (let k = 0; k < parts; k++) {
      const mine = runNativeKernel("fsm_vocab_ce_sums", [slice(k), targets, maxes], { tensor_rank: k }, [f32([2, rows])])[0] as Float32Array;
      mine.forEach((v, i) => (sums.data[i] += v)); // the all-reduce
    }
    const loss = (runNativeKernel("fsm_vocab_ce_loss", [sums, maxes], {}, [f32([])])[0] as Float32Array)[0]!;
    const want = (runNativeKernel("cross_entropy", [{ shape: [rows, V], data: whole }, targets], {}, [f32([])])[0] as Float32Array)[0]!;
    expect(Math.abs(loss - want)).toBeLessThan(1e-6 * Math.abs(want));
    const dloss = { shape: [], data: Float32Array.of(0.7) };
    const wantGrad = runNativeKernel("cross_entropy_grad", [dloss, { shape: [rows, V], data: whole }, targets], {}, [f32([rows, V])])[0] as Float32Array;
    for (let k = 0; k < parts; k++) {
      const grad = runNativeKernel("fsm_vocab_ce_grad", [dloss, slice(k), targets, sums, maxes], { tensor_rank: k }, [f32([rows, local])])[0] as Float32Array;
      grad.forEach((g, i) => expect(Math.abs(g - wantGrad[Math.floor(i / local) * V + k * local + (i % local)]!)).toBeLessThan(1e-6));
    }
    // A target outside the whole vocabulary is the whole loss's error.
    expect(() => runNativeKernel("fsm_vocab_ce_sums", [slice(0), { shape: [rows], data: Int32Array.of(0, 1, 2, 3, 8) }, maxes], { tensor_rank: 0 }, [f32([2, rows])])).toThrow(/target 8 is out of range \[0, 8\)/);
  });

  it("relu keeps NaN as PyTorch does (a poisoned activation reaches the loss), in both kernels", () => {
    const x = { shape: [3], data: Float32Array.of(Number.NaN, -1, 2) };
    const native = nativeKernel("relu")([x], {}, { outShapes: [[3]], float: "f32" })[0]!.data;
    const interp = kernelFor("relu")([x], {}, { outShapes: [[3]], float: "f32" })[0]!.data;
    for (const out of [native, interp]) expect(Array.from(out)).toEqual([Number.NaN, 0, 2]);
  });

  it("sum_to agrees with the interpreter's over every pattern of reduced dims", () => {
    // Columns kept with runs of rows reduced before them (bias gradients, a middle dim, an outer dim, several
    // runs into one output row), the last dim reduced (row sums, interleaved outputs), everything, size-1 dims.
    const cases: [number[], number[]][] = [
      [[16, 8, 40], [40]], [[6, 7, 5], [6, 1, 5]], [[9, 4, 6], [4, 6]], [[3, 4, 5, 6], [1, 4, 1, 6]], [[3, 37, 21], [3, 37, 1]],
      [[3, 4, 2, 5], [3, 1, 2, 1]], [[5, 9], []], [[4, 1, 6], [1, 6]], [[2, 3, 4], [2, 3, 1]],
    ];
    cases.forEach(([from, to], seed) => {
      const x = { shape: from, data: Float32Array.from({ length: from.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i * 0.7 + seed) * 3) };
      const ctx = { outShapes: [to], float: "f32" as const };
      const native = nativeKernel("sum_to")([x], {}, ctx)[0]!.data;
      const interp = kernelFor("sum_to")([x], {}, ctx)[0]!.data;
      // Both sum in double and round once; a row's sum adds in another order (vectorized lanes).
      interp.forEach((want, i) => expect(Math.abs(native[i]! - want), `${JSON.stringify(from)} -> ${JSON.stringify(to)} [${i}]`).toBeLessThanOrEqual(1e-6 * Math.abs(want) + 1e-12));
    });
  });

  it("an op without a native kernel is a clear error", () => {
    expect(() => nativeKernel("no_such_op")([], {}, { outShapes: [], float: "f32" })).toThrow("not implemented: native kernel for op 'no_such_op' on device kind cpu");
  });

  it("kernel failures and malformed calls carry their fields", () => {
    const failureOf = (call: () => unknown) => {
      try {
        call();
      } catch (e) {
        return nativeFailure(e);
      }
      throw new Error("expected the call to throw");
    };
    const embed = () => runNativeKernel("embedding", [{ data: Int32Array.of(4), shape: [1] }, { data: new Float32Array(6), shape: [3, 2] }], {}, [{ shape: [1, 2], dtype: "f32" }]);
    expect(embed).toThrow(/^native kernel embedding: embedding index 4 is out of range \[0, 3\)$/);
    expect(failureOf(embed)).toEqual({ kind: "kernel", op: "embedding", message: "embedding index 4 is out of range [0, 3)" });
    expect(failureOf(() => runNativeKernel("no_such_op", [], {}, []))).toMatchObject({ kind: "description", message: "not implemented: native kernel for op 'no_such_op' on device kind cpu" });
    expect(failureOf(() => runNativeKernel("relu", [{ data: new Float32Array(2), shape: [3] }], {}, [{ shape: [3], dtype: "f32" }]))).toMatchObject({
      kind: "description", message: "runKernel relu: input 0: data length does not match its shape",
    });
  });
});
