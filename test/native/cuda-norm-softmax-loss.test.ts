// The CUDA device's norms, softmax and losses (on the SIMT emulator) against the CPU kernels at the corners the
// model graphs do not reach: rows longer than a block and not a multiple of a warp, a strided softmax axis,
// vocabularies larger than a block, 16-bit operands, an empty batch of rows for the weight gradient's partials,
// and a target out of range (the CPU's error, raised after the kernel).
import { describe, expect, it } from "vitest";
import { nativeFailure, runNativeKernel, type NativeData, type NativeOperand, type NativeOutput } from "../../src/native/binding.js";
import { rng } from "../support/prng.js";

function floats(shape: readonly number[], seed: number, scale = 2): NativeOperand {
  const rand = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return { shape, data: Float32Array.from({ length: n }, () => (rand() * 2 - 1) * scale) };
}

function ints(shape: readonly number[], seed: number, below: number): NativeOperand {
  const rand = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return { shape, data: Int32Array.from({ length: n }, () => Math.floor(rand() * below)) };
}

function both(op: string, inputs: NativeOperand[], attrs: Record<string, number | boolean>, outputs: NativeOutput[]): [NativeData[], NativeData[]] {
  return [runNativeKernel(op, inputs, attrs, outputs), runNativeKernel(op, inputs, attrs, outputs, { device: "simt" })];
}

/** Worst |cuda − cpu| / (atol + rtol·|cpu|) over every output (≤ 1 passes). */
function worst([cpu, cuda]: [NativeData[], NativeData[]], rtol = 1e-4, atol = 1e-5): number {
  let w = 0;
  cpu.forEach((c, i) => {
    const g = cuda[i]!;
    expect(g.length).toBe(c.length);
    for (let k = 0; k < c.length; k++) w = Math.max(w, Math.abs(c[k]! - g[k]!) / (atol + rtol * Math.abs(c[k]!)));
  });
  return w;
}

describe("norms", () => {
  for (const [rows, d] of [[3, 1000], [5, 37], [1, 1], [130, 64]] as const) {
    for (const norm of ["layer_norm", "rms_norm"]) {
      it(`${norm} and its gradients over ${rows} rows of ${d}`, () => {
        const x = floats([rows, d], 1), w = floats([d], 2), b = floats([d], 3), dy = floats([rows, d], 4);
        const attrs = { eps: 1e-5 };
        const f32 = (shape: number[]): NativeOutput => ({ shape, dtype: "f32" });
        const inputs = norm === "layer_norm" ? [x, w, b] : [x, w];
        expect(worst(both(norm, inputs, attrs, [f32([rows, d])]))).toBeLessThanOrEqual(1);
        expect(worst(both(`${norm}_grad_input`, [dy, x, w], attrs, [f32([rows, d])]))).toBeLessThanOrEqual(1);
        // Σ over rows: with f32 partials of 64 rows, a looser absolute tolerance for values that cancel.
        expect(worst(both(`${norm}_grad_weight`, [dy, x], attrs, [f32([d])]), 1e-4, 1e-4)).toBeLessThanOrEqual(1);
      });
    }
  }

  it("a layer norm of bf16 operands writes the CPU's result rounded once", () => {
    const x = floats([4, 300], 5);
    const bits = (t: NativeOperand): NativeOperand => ({ shape: t.shape, dtype: "bf16", data: runNativeKernel("fsm_cast", [t], {}, [{ shape: t.shape, dtype: "bf16" }])[0]! });
    const wide = (t: NativeOperand): NativeOperand => ({ shape: t.shape, data: runNativeKernel("fsm_cast", [t], {}, [{ shape: t.shape, dtype: "f32" }])[0]! });
    const w = floats([300], 6);
    const cpu = runNativeKernel("layer_norm", [wide(bits(x)), w], { eps: 1e-5 }, [{ shape: [4, 300], dtype: "f32" }])[0]! as Float32Array;
    const gpu = runNativeKernel("layer_norm", [bits(x), w], { eps: 1e-5 }, [{ shape: [4, 300], dtype: "bf16" }], { device: "simt" })[0]!;
    const back = runNativeKernel("fsm_cast", [{ shape: [1200], dtype: "bf16", data: gpu }], {}, [{ shape: [1200], dtype: "f32" }])[0]! as Float32Array;
    for (let k = 0; k < cpu.length; k++) expect(Math.abs(back[k]! - cpu[k]!)).toBeLessThanOrEqual(Math.abs(cpu[k]!) * 2 ** -8 + 1e-6);
  });
});

describe("softmax", () => {
  for (const [shape, dim] of [[[6, 700], -1], [[4, 5, 3], 1], [[2, 3, 4], 0], [[9, 1], 1]] as const) {
    it(`over dim ${dim} of [${shape.join(", ")}], and its gradient`, () => {
      const x = floats(shape, 7, 6), dy = floats(shape, 8);
      const out: NativeOutput[] = [{ shape: [...shape], dtype: "f32" }];
      const [cpu, gpu] = both("softmax", [x], { dim }, out);
      expect(worst([cpu, gpu])).toBeLessThanOrEqual(1);
      expect(worst(both("softmax_grad", [dy, { shape, data: cpu[0]! }], { dim }, out))).toBeLessThanOrEqual(1);
    });
  }
});

describe("losses", () => {
  it("cross-entropy over a vocabulary larger than a block, and its gradient", () => {
    const logits = floats([2, 3, 1000], 9, 8), targets = ints([2, 3], 10, 1000), dloss = { shape: [], data: Float32Array.of(0.7) };
    expect(worst(both("cross_entropy", [logits, targets], {}, [{ shape: [], dtype: "f32" }]))).toBeLessThanOrEqual(1);
    expect(worst(both("cross_entropy_grad", [dloss, logits, targets], {}, [{ shape: [2, 3, 1000], dtype: "f32" }]))).toBeLessThanOrEqual(1);
  });

  it("mse over more elements than one block sums, and its gradient", () => {
    const a = floats([70000], 11), b = floats([70000], 12), dloss = { shape: [], data: Float32Array.of(-1.5) };
    expect(worst(both("mse_loss", [a, b], {}, [{ shape: [], dtype: "f32" }]))).toBeLessThanOrEqual(1);
    expect(worst(both("mse_loss_grad", [dloss, a, b], {}, [{ shape: [70000], dtype: "f32" }]))).toBeLessThanOrEqual(1);
  });

  it("a target out of range is the CPU's error, found on the device after the kernel", () => {
    const call = () => runNativeKernel("cross_entropy", [floats([2, 5], 1), { shape: [2], data: Int32Array.of(1, 5) }], {}, [{ shape: [], dtype: "f32" }], { device: "simt" });
    expect(call).toThrow("native kernel cross_entropy: cross_entropy target 5 is out of range [0, 5)");
    try {
      call();
    } catch (e) {
      expect(nativeFailure(e)).toMatchObject({ kind: "kernel", message: "cross_entropy target 5 is out of range [0, 5)" });
    }
  });

  it("the same bits every run (fixed reduction orders, no atomics)", () => {
    const logits = floats([64, 300], 13, 8), targets = ints([64], 14, 300);
    const runs = [0, 1, 2].map(() => Array.from(runNativeKernel("cross_entropy", [logits, targets], {}, [{ shape: [], dtype: "f32" }], { device: "simt" })[0]!));
    expect(runs[1]).toEqual(runs[0]);
    expect(runs[2]).toEqual(runs[0]);
  });
});
