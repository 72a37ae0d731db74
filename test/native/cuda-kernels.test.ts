// The CUDA device's kernels, run on the SIMT emulator (device kind "simt": the same sources the GPU build
// compiles, executed on the host), against the interpreter's on the real graphs the CPU kernels are held to,
// and against the CPU kernels on the ops a lowered program adds; plus the kernels' own edge cases.
import { describe, expect, it } from "vitest";
import { nativeFailure, nativeGpuKind, nativeKernelNames, runNativeKernel, type NativeData } from "../../src/native/binding.js";
import { compareKernels } from "../../src/native/kernel-parity.js";
import { compareStep, STEP_CASES, trainingGraph } from "../support/kernel-step.js";
import { both, expectClose as closeTo, floats, SIMT } from "../support/simt-kernels.js";

const DEVICE = SIMT;
const expectClose = (cpu: NativeData[], cuda: NativeData[], rtol = 1e-5, atol = 1e-6): void => closeTo(cpu, cuda, rtol, atol);

describe("CUDA kernels (on the SIMT emulator) match the interpreter's", () => {
  for (const [name, overrides, batch, seq] of STEP_CASES) {
    it(`${name} ${JSON.stringify(overrides)}: every op with a CUDA kernel agrees`, () => {
      const r = compareStep(trainingGraph(name, overrides), seq, batch, DEVICE);
      expect(r.mismatches).toEqual([]);
      expect(r.compared).toBeGreaterThan(0);
    });
  }

  // What mixed precision feeds the kernels (and the GPU check measures): 16-bit operands, the tensor-core
  // attention among them, each op against the interpreter on the same rounded values.
  for (const name of ["gpt-tiny", "llama-tiny"]) {
    it(`${name} with bf16 operands: every op within bf16's tolerance`, () => {
      const r = compareKernels(trainingGraph(name, {}), { batch: 4, seq: name === "gpt-tiny" ? 16 : 8, device: DEVICE, operands: "bf16" });
      expect(r.mismatches).toEqual([]);
      expect(r.worstByOp.get("attention_grad_input")).toBeGreaterThan(0);
    });
  }

  it("every op the CPU device has, the CUDA device has", () => {
    const cuda = new Set(nativeKernelNames(DEVICE));
    const missing = nativeKernelNames("cpu").filter((op) => !cuda.has(op));
    expect(missing, `CUDA kernels missing for: ${missing.join(", ")}`).toEqual([]);
  });
});




describe("CUDA kernels of lowered programs match the CPU's", () => {
  it("broadcasting binary ops over every pattern", () => {
    for (const [a, b, out] of [
      [[2, 3, 4], [2, 3, 4], [2, 3, 4]],
      [[2, 3, 4], [4], [2, 3, 4]],
      [[2, 1, 4], [3, 1], [2, 3, 4]],
      [[1], [5, 2], [5, 2]],
    ] as number[][][]) {
      for (const op of ["add", "sub", "mul", "div"]) {
        const [cpu, cuda] = both(op, [floats(a!, 1), floats(b!, 2)], {}, [{ shape: out!, dtype: "f32" }]);
        expect(Array.from(cuda[0]!)).toEqual(Array.from(cpu[0]!));  // one f32 operation: the same bits
      }
    }
  });

  it("the gradient accumulation, scaling, copy and cast ops", () => {
    const x = floats([1000], 3), y = floats([1000], 4);
    expectClose(...both("fsm_accumulate", [x, y], { scale: 0.25 }, [{ shape: [1000], dtype: "f32" }]));
    expectClose(...both("fsm_scale", [x], { scale: -3 }, [{ shape: [1000], dtype: "f32" }]));
    expectClose(...both("fsm_copy", [x], {}, [{ shape: [1000], dtype: "f32" }]));
    expectClose(...both("fsm_scale_by", [x, { shape: [], data: Float32Array.of(8) }], { scale: 0.5 }, [{ shape: [1000], dtype: "f32" }]));
    for (const dtype of ["bf16", "f16"] as const) {
      const [cpu, cuda] = both("fsm_cast", [x], {}, [{ shape: [1000], dtype }]);
      expect(Array.from(cuda[0]!)).toEqual(Array.from(cpu[0]!));
      const back = both("fsm_cast", [{ shape: [1000], data: cpu[0]!, dtype }], {}, [{ shape: [1000], dtype: "f32" }]);
      expect(Array.from(back[1][0]!)).toEqual(Array.from(back[0][0]!));
    }
    const bad = floats([300], 5);
    (bad.data as Float32Array)[257] = Number.POSITIVE_INFINITY;
    expectClose(...both("fsm_nonfinite", [x, bad], {}, [{ shape: [], dtype: "f32" }]));
    expectClose(...both("fsm_nonfinite", [x, y], {}, [{ shape: [], dtype: "f32" }]));
  });

  it("the tensor-parallel copy and slice (each rank's part of the last dimension), in f32 and 16-bit storage", () => {
    const x = floats([6, 3, 8], 6);
    expect(Array.from(both("tp_copy", [x], { parts: 2 }, [{ shape: [6, 3, 8], dtype: "f32" }])[1][0]!)).toEqual(Array.from(x.data));
    for (const [parts, rank] of [[2, 0], [2, 1], [4, 3]] as const) {
      const [cpu, cuda] = both("tp_slice", [x], { parts, tensor_rank: rank }, [{ shape: [6, 3, 8 / parts], dtype: "f32" }]);
      expect(Array.from(cuda[0]!)).toEqual(Array.from(cpu[0]!));
      expect(cpu[0]![1]).toBe((x.data as Float32Array)[rank * (8 / parts) + 1]); // row 0, column 1 of the part
    }
    const half = both("fsm_cast", [x], {}, [{ shape: [6, 3, 8], dtype: "bf16" }])[0][0]!;
    const [cpu, cuda] = both("tp_slice", [{ shape: [6, 3, 8], data: half, dtype: "bf16" }], { parts: 2, tensor_rank: 1 }, [{ shape: [6, 3, 4], dtype: "bf16" }]);
    expect(Array.from(cuda[0]!)).toEqual(Array.from(cpu[0]!));
  });

  it("the vocabulary-parallel loss's pieces: row maxima, sums, the loss and its gradient", () => {
    const [rows, local, parts] = [6, 5, 2];
    const logits = floats([rows, local], 8);
    const targets = { shape: [rows], data: Int32Array.of(0, 7, 4, 9, 5, 2) };
    const [cpuMax, cudaMax] = both("fsm_vocab_ce_max", [logits], {}, [{ shape: [rows], dtype: "f32" }]);
    expect(Array.from(cudaMax[0]!)).toEqual(Array.from(cpuMax[0]!));
    // The other rank's maxima, as the all-gather would bring them (rank 0's first).
    const maxes = { shape: [parts, rows], data: Float32Array.from([...cpuMax[0]!, ...Array.from({ length: rows }, (_, r) => (r % 2 === 0 ? 3 : -3))]) };
    for (const rank of [0, 1]) {
      const sums = both("fsm_vocab_ce_sums", [logits, targets, maxes], { tensor_rank: rank }, [{ shape: [2, rows], dtype: "f32" }]);
      expectClose(...sums, 1e-6, 1e-7);
      const s = { shape: [2, rows], data: sums[0][0]! };
      expectClose(...both("fsm_vocab_ce_loss", [s, maxes], {}, [{ shape: [], dtype: "f32" }]), 1e-6, 1e-7);
      expectClose(...both("fsm_vocab_ce_grad", [{ shape: [], data: Float32Array.of(0.5) }, logits, targets, s, maxes], { tensor_rank: rank }, [{ shape: [rows, local], dtype: "f32" }]), 1e-5, 1e-7);
    }
  });

  it("a vocabulary-parallel table: each rank looks up its rows (zeros for the others') and adds only to them, as the CPU does", () => {
    // A table of 6 rows over 2 ranks (3 each); ids of both ranks' rows, repeated so the gradient sums.
    const ids = { data: Int32Array.of(0, 4, 2, 5, 4, 1, 3, 4), shape: [2, 4] };
    const dy = { data: Float32Array.from({ length: 16 }, (_, i) => 0.25 * i - 1.5), shape: [2, 4, 2] };
    for (const tensor_rank of [0, 1]) {
      const table = { data: Float32Array.from({ length: 6 }, (_, i) => 10 * tensor_rank + i + 1), shape: [3, 2] };
      const attrs = { parts: 2, tensor_rank };
      const lookup = (device?: typeof DEVICE) => runNativeKernel("embedding", [ids, table], attrs, [{ shape: [2, 4, 2], dtype: "f32" }], device ? { device } : {});
      const grad = (device?: typeof DEVICE) => runNativeKernel("embedding_grad_weight", [dy, ids], { ...attrs, num: 3 }, [{ shape: [3, 2], dtype: "f32" }], device ? { device } : {});
      expect(Array.from(lookup(DEVICE)[0]!), `lookup, rank ${tensor_rank}`).toEqual(Array.from(lookup()[0]!));
      expect(Array.from(grad(DEVICE)[0]!), `gradient, rank ${tensor_rank}`).toEqual(Array.from(grad()[0]!));
    }
    // By hand, rank 1 (rows 3..5): id 4 at positions 1, 4, 7 → table row 1 = dy[1] + dy[4] + dy[7].
    const rank1 = runNativeKernel("embedding_grad_weight", [dy, ids], { parts: 2, tensor_rank: 1, num: 3 }, [{ shape: [3, 2], dtype: "f32" }], { device: DEVICE })[0]!;
    const row = (p: number, c: number): number => dy.data[2 * p + c]!;
    expect(Array.from(rank1.subarray(2, 4))).toEqual([row(1, 0) + row(4, 0) + row(7, 0), row(1, 1) + row(4, 1) + row(7, 1)]);
  });
});

describe("CUDA kernel edge cases", () => {
  it("relu keeps NaN as PyTorch does", () => {
    const out = runNativeKernel("relu", [{ shape: [3], data: Float32Array.of(Number.NaN, -1, 2) }], {}, [{ shape: [3], dtype: "f32" }], { device: DEVICE });
    expect(Array.from(out[0]!)).toEqual([Number.NaN, 0, 2]);
  });

  it("an index out of range is the CPU's error, found on the device", () => {
    const embed = () => runNativeKernel("embedding", [{ data: Int32Array.of(0, 4), shape: [2] }, { data: new Float32Array(6), shape: [3, 2] }], {}, [{ shape: [2, 2], dtype: "f32" }], { device: DEVICE });
    expect(embed).toThrow("native kernel embedding: embedding index 4 is out of range [0, 3)");
    try {
      embed();
    } catch (e) {
      expect(nativeFailure(e)).toMatchObject({ kind: "kernel", message: "embedding index 4 is out of range [0, 3)" });
    }
  });

  // (On a machine with a GPU the cuda kind runs instead: bench/gpu checks it there.)
  it.skipIf((nativeGpuKind("cuda")?.devices ?? 0) > 0)("the cuda kind without a GPU (or without a cuda build) is a clear error, not a crash", () => {
    const call = () => runNativeKernel("add", [floats([2], 1), floats([2], 2)], {}, [{ shape: [2], dtype: "f32" }], { device: "cuda" });
    expect(call).toThrow(/no CUDA device|built without CUDA/);
  });
});
