// Every native kernel against the interpreter's on real graphs: one training step of mlp, gpt-tiny (tied
// embedding, GELU, layer norm, causal attention, Adam with clipping) and a tiny Llama (GQA, rotary, RMSNorm,
// SwiGLU, AdamW, SGD variants) runs op by op in f32 with the interpreter's kernels; each op's native kernel
// gets the same operands and must give the same outputs (rtol 1e-4, atol 1e-5, as the PyTorch parity test).
import { describe, expect, it } from "vitest";
import { KERNELS, kernelFor } from "../../src/interp/kernels/index.js";
import { nativeFailure, runNativeKernel } from "../../src/native/binding.js";
import { hasNativeKernel, nativeKernel } from "../../src/native/kernels.js";
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
    const missing = Object.keys(KERNELS).filter((op) => !hasNativeKernel(op));
    expect(missing, `native kernels missing for: ${missing.join(", ")}`).toEqual([]);
    const unexercised = Object.keys(KERNELS).filter((op) => !seen.has(op));
    expect(unexercised, `no test model uses: ${unexercised.join(", ")}`).toEqual([]);
  });

  it("relu keeps NaN as PyTorch does (a poisoned activation reaches the loss), in both kernels", () => {
    const x = { shape: [3], data: Float32Array.of(Number.NaN, -1, 2) };
    const native = nativeKernel("relu")([x], {}, { outShapes: [[3]], float: "f32" })[0]!.data;
    const interp = kernelFor("relu")([x], {}, { outShapes: [[3]], float: "f32" })[0]!.data;
    for (const out of [native, interp]) expect(Array.from(out)).toEqual([Number.NaN, 0, 2]);
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
