// The CUDA device's normalization, softmax and loss kernels (device/cuda/kernels/{norm,softmax,loss}.cu) on the
// SIMT emulator against the CPU kernels, on the shapes that reach their corners: rows a warp each and rows a
// block each (longer than the block, not a multiple of 32), the weight gradients' chunked column reduction,
// softmax along every axis, large vocabularies, −∞ and large logits, 16-bit operands, and bad targets.
import { describe, expect, it } from "vitest";
import { nativeFailure, runNativeKernel, type NativeData, type NativeDType, type NativeOperand, type NativeOutput } from "../../src/native/binding.js";
import { rng } from "../support/prng.js";
import { both, expectClose as closeTo, SIMT } from "../support/simt-kernels.js";

const DEVICE = SIMT;
const expectClose = (cpu: NativeData[], cuda: NativeData[], rtol = 1e-4, atol = 1e-5): void => closeTo(cpu, cuda, rtol, atol);
type Attrs = Record<string, number | boolean | string>;

/** Random f32 operands in [offset − 2, offset + 2). */
function floats(shape: readonly number[], seed: number, offset = 0): NativeOperand {
  const rand = rng(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  return { shape, data: Float32Array.from({ length: n }, () => offset + rand() * 4 - 2) };
}

function ints(shape: readonly number[], values: number[]): NativeOperand {
  return { shape, data: Int32Array.from(values) };
}

function scalar(v: number): NativeOperand {
  return { shape: [], data: Float32Array.of(v) };
}

const f32 = (shape: readonly number[]): NativeOutput => ({ shape, dtype: "f32" });



function check(op: string, inputs: NativeOperand[], attrs: Attrs, outputs: NativeOutput[]): void {
  expectClose(...both(op, inputs, attrs, outputs));
}

/** An f32 operand rounded to 16 bits (by the CPU's fsm_cast), and the same values back as f32. */
function half(x: NativeOperand, dtype: NativeDType): { half: NativeOperand; exact: NativeOperand } {
  const bits = runNativeKernel("fsm_cast", [x], {}, [{ shape: x.shape, dtype }])[0]!;
  const h = { shape: x.shape, data: bits, dtype };
  return { half: h, exact: { shape: x.shape, data: runNativeKernel("fsm_cast", [h], {}, [f32(x.shape)])[0]! } };
}

function decode(bits: NativeData, shape: readonly number[], dtype: NativeDType): NativeData {
  return runNativeKernel("fsm_cast", [{ shape, data: bits, dtype }], {}, [f32(shape)])[0]!;
}

/** The op on 16-bit operands on the device against the CPU on their exact f32 values: f32 outputs within the
 *  parity target, 16-bit outputs within a rounding of it. */
function checkHalf(op: string, inputs: NativeOperand[], attrs: Attrs, outShape: readonly number[], dtype: NativeDType, convert: boolean[]): void {
  const cast = inputs.map((x, i) => (convert[i] ? half(x, dtype) : { half: x, exact: x }));
  const cpu = runNativeKernel(op, cast.map((c) => c.exact), attrs, [f32(outShape)]);
  const cudaF32 = runNativeKernel(op, cast.map((c) => c.half), attrs, [f32(outShape)], { device: DEVICE });
  expectClose(cpu, cudaF32);
  const cudaHalf = runNativeKernel(op, cast.map((c) => c.half), attrs, [{ shape: outShape, dtype }], { device: DEVICE });
  expectClose(cpu, [decode(cudaHalf[0]!, outShape, dtype)], dtype === "bf16" ? 8e-3 : 1e-3, 1e-4);
}

// Warp rows (d ≤ 1024): d below a warp, not a multiple of 32, exactly 1024; block rows: d longer than the
// block of 256 and not a multiple of it, and past 8192 (a block of 1024).
const NORM_SHAPES: number[][] = [[3, 5], [4, 37], [2, 3, 100], [5, 1024], [3, 1500], [2, 9000]];

describe("CUDA layer_norm and rms_norm match the CPU's", () => {
  for (const shape of NORM_SHAPES) {
    const d = shape[shape.length - 1]!;
    it(`forward and both gradients over ${JSON.stringify(shape)}`, () => {
      const x = floats(shape, 1, 0.5), w = floats([d], 2), b = floats([d], 3), dy = floats(shape, 4);
      for (const eps of [1e-5, 0.25]) {
        check("layer_norm", [x, w, b], { eps }, [f32(shape)]);
        check("layer_norm", [x, w], { eps }, [f32(shape)]);
        check("rms_norm", [x, w], { eps }, [f32(shape)]);
        for (const kind of ["layer_norm", "rms_norm"]) {
          check(`${kind}_grad_input`, [dy, x, w], { eps }, [f32(shape)]);
          check(`${kind}_grad_weight`, [dy, x], { eps }, [f32([d])]);
        }
      }
    });
  }

  it("rows far from zero (the two-pass variance keeps its precision)", () => {
    const x = floats([6, 300], 5, 100), w = floats([300], 6), dy = floats([6, 300], 7);
    check("layer_norm", [x, w, floats([300], 8)], { eps: 1e-5 }, [f32([6, 300])]);
    check("layer_norm_grad_input", [dy, x, w], { eps: 1e-5 }, [f32([6, 300])]);
    check("layer_norm_grad_weight", [dy, x], { eps: 1e-5 }, [f32([300])]);
  });

  it("the weight gradient over many rows: several row chunks, the chunk count capped (last chunks empty)", () => {
    for (const [rows, d] of [[33, 40], [167, 40], [9000, 3], [70, 1100]] as const) {
      const x = floats([rows, d], 9), dy = floats([rows, d], 10);
      for (const op of ["layer_norm_grad_weight", "rms_norm_grad_weight"]) {
        const [cpu, cuda] = both(op, [dy, x], { eps: 1e-5 }, [f32([d])]);
        expectClose(cpu, cuda);
        // A fixed-order reduction: the same bits on every run.
        expect(Array.from(runNativeKernel(op, [dy, x], { eps: 1e-5 }, [f32([d])], { device: DEVICE })[0]!)).toEqual(Array.from(cuda[0]!));
      }
    }
  });

  it("16-bit operands (bf16 and f16), read and written as f32", () => {
    for (const dtype of ["bf16", "f16"] as const) {
      for (const shape of [[4, 37], [2, 1500]]) {
        const d = shape[1]!;
        const x = floats(shape, 11), w = floats([d], 12), b = floats([d], 13), dy = floats(shape, 14);
        checkHalf("layer_norm", [x, w, b], { eps: 1e-5 }, shape, dtype, [true, true, true]);
        checkHalf("rms_norm", [x, w], { eps: 1e-5 }, shape, dtype, [true, false]);
        checkHalf("layer_norm_grad_input", [dy, x, w], { eps: 1e-5 }, shape, dtype, [true, true, true]);
        checkHalf("rms_norm_grad_weight", [dy, x], { eps: 1e-5 }, [d], dtype, [true, true]);
      }
    }
  });
});

describe("CUDA softmax and softmax_grad match the CPU's", () => {
  it("along every axis of a 3-D tensor, negative and positive (the strided path and the row path)", () => {
    const shape = [3, 4, 5];
    const x = floats(shape, 20), dy = floats(shape, 21);
    for (const dim of [0, 1, 2, -1, -2, -3]) {
      const [cpu, cuda] = both("softmax", [x], { dim }, [f32(shape)]);
      expectClose(cpu, cuda);
      check("softmax_grad", [dy, { shape, data: cpu[0]! }], { dim }, [f32(shape)]);
    }
  });

  it("rows a warp each and a block each, not multiples of 32 or of the block, and long strided lines", () => {
    for (const [shape, dim] of [[[6, 33], -1], [[7, 1024], 1], [[4, 2000], -1], [[2, 9000], 1], [[1100, 3], 0], [[2, 70, 40], 1]] as const) {
      const x = floats(shape, 22, 3), dy = floats(shape, 23);
      const [cpu, cuda] = both("softmax", [x], { dim }, [f32(shape)]);
      expectClose(cpu, cuda);
      check("softmax_grad", [dy, { shape, data: cpu[0]! }], { dim }, [f32(shape)]);
    }
  });

  it("large logits are max-subtracted, −∞ entries (a mask) give zeros, and an all −∞ line is NaN as on the CPU", () => {
    for (const [shape, dim] of [[[4, 40], -1], [[4, 1500], -1], [[4, 6, 3], 1]] as const) {
      const x = floats(shape, 24, 500);
      const data = x.data as Float32Array;
      for (let k = 0; k < data.length; k += 4) data[k] = Number.NEGATIVE_INFINITY;
      data[0] = Number.NEGATIVE_INFINITY;  // the first entry −∞ before any finite one
      const n = shape[dim < 0 ? shape.length + dim : dim]!;
      const inner = shape.slice((dim < 0 ? shape.length + dim : dim) + 1).reduce((a, b) => a * b, 1);
      for (let i = 0; i < n; i++) data[(shape.length === 2 ? shape[1]! : n * inner) + i * inner] = Number.NEGATIVE_INFINITY;  // line 1: all −∞
      const [cpu, cuda] = both("softmax", [x], { dim }, [f32(shape)]);
      expect(Array.from(cpu[0]!).some(Number.isNaN)).toBe(true);
      expect(Array.from(cpu[0]!).some((v) => v === 0)).toBe(true);
      expectClose(cpu, cuda);
    }
  });

  it("16-bit operands", () => {
    for (const dtype of ["bf16", "f16"] as const) {
      for (const [shape, dim] of [[[5, 40], -1], [[3, 1300], 1], [[3, 7, 4], 1]] as const) {
        const x = floats(shape, 25);
        checkHalf("softmax", [x], { dim }, shape, dtype, [true]);
        const y = runNativeKernel("softmax", [x], { dim }, [f32(shape)]);
        checkHalf("softmax_grad", [floats(shape, 26), { shape, data: y[0]! }], { dim }, shape, dtype, [true, true]);
      }
    }
  });
});

describe("CUDA losses match the CPU's", () => {
  it("cross_entropy and its gradient: small vocabularies, leading dims, a GPT-2-sized vocabulary", () => {
    for (const [lead, v] of [[[5], 7], [[2, 3], 40], [[3], 1500], [[3], 50257]] as const) {
      const rows = lead.reduce((a, b) => a * b, 1);
      const rand = rng(v);
      const targets = ints(lead, Array.from({ length: rows }, () => Math.floor(rand() * v)));
      targets.data[0] = v - 1;
      if (rows > 1) targets.data[1] = 0;
      const logits = floats([...lead, v], 30 + v, 1);
      check("cross_entropy", [logits, targets], {}, [f32([])]);
      check("cross_entropy_grad", [scalar(0.75), logits, targets], {}, [f32([...lead, v])]);
    }
  });

  it("cross_entropy's mean over many rows is a fixed-order reduction", () => {
    const rows = 1100, v = 9;
    const logits = floats([rows, v], 31, 2);
    const targets = ints([rows], Array.from({ length: rows }, (_, r) => (r * 7) % v));
    const [cpu, cuda] = both("cross_entropy", [logits, targets], {}, [f32([])]);
    expectClose(cpu, cuda);
    expect(runNativeKernel("cross_entropy", [logits, targets], {}, [f32([])], { device: DEVICE })[0]![0]).toBe(cuda[0]![0]);
  });

  it("large and −∞ logits", () => {
    const logits = floats([4, 100], 32, 800);
    const data = logits.data as Float32Array;
    for (let k = 1; k < data.length; k += 5) data[k] = Number.NEGATIVE_INFINITY;
    const targets = ints([4], [0, 2, 99, 50]);
    check("cross_entropy", [logits, targets], {}, [f32([])]);
    check("cross_entropy_grad", [scalar(-2), logits, targets], {}, [f32([4, 100])]);
  });

  it("a target out of range is the CPU's error, found on the device", () => {
    for (const bad of [7, -1, 1000]) {
      const logits = floats([3, 7], 33);
      const targets = ints([3], [1, bad, 2]);
      const message = `cross_entropy target ${bad} is out of range [0, 7)`;
      const calls: [string, NativeOperand[], NativeOutput[]][] = [
        ["cross_entropy", [logits, targets], [f32([])]],
        ["cross_entropy_grad", [scalar(1), logits, targets], [f32([3, 7])]],
      ];
      for (const [op, inputs, outputs] of calls) {
        expect(() => runNativeKernel(op, inputs, {}, outputs)).toThrow(message);
        let failure: unknown;
        try {
          runNativeKernel(op, inputs, {}, outputs, { device: DEVICE });
        } catch (e) {
          failure = e;
        }
        expect(failure).toBeInstanceOf(Error);
        expect((failure as Error).message).toContain(`native kernel ${op}: ${message}`);
        expect(nativeFailure(failure)).toMatchObject({ kind: "kernel", message });
      }
    }
  });

  it("mse_loss and its gradient, from one element to many blocks' partial sums", () => {
    for (const shape of [[1], [3, 5], [1000], [70, 1001]]) {
      const a = floats(shape, 40), b = floats(shape, 41, 0.5);
      check("mse_loss", [a, b], {}, [f32([])]);
      check("mse_loss_grad", [scalar(1.5), a, b], {}, [f32(shape)]);
    }
    const a = floats([70, 1001], 42), b = floats([70, 1001], 43);
    const once = runNativeKernel("mse_loss", [a, b], {}, [f32([])], { device: DEVICE })[0]![0];
    expect(runNativeKernel("mse_loss", [a, b], {}, [f32([])], { device: DEVICE })[0]![0]).toBe(once);
  });

  it("16-bit operands and 16-bit incoming gradients", () => {
    for (const dtype of ["bf16", "f16"] as const) {
      const targets = ints([4], [0, 3, 199, 100]);
      const logits = floats([4, 200], 44);
      checkHalf("cross_entropy", [logits, targets], {}, [], dtype, [true, false]);
      checkHalf("cross_entropy_grad", [scalar(0.5), logits, targets], {}, [4, 200], dtype, [true, true, false]);
      const a = floats([300], 45), b = floats([300], 46);
      checkHalf("mse_loss", [a, b], {}, [], dtype, [true, true]);
      checkHalf("mse_loss_grad", [scalar(3), a, b], {}, [300], dtype, [true, true, true]);
    }
  });
});
