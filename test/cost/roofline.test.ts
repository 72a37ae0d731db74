// Roofline times by hand: a compute-bound matmul and a memory-bound elementwise op on the A100 profile.
import { describe, expect, it } from "vitest";
import { getProfile } from "../../src/cost/cluster.js";
import { peakFormat, roofline } from "../../src/cost/roofline.js";

const a100 = getProfile("a100-80g");

describe("roofline", () => {
  it("a large bf16 matmul is compute-bound", () => {
    // 8192³ GEMM: 2·8192³ FLOPs at 0.7 × 312 TFLOP/s; bytes 3 × 8192² × 2 at 0.8 × 2039 GB/s.
    const n = 8192;
    const flops = 2 * n ** 3;
    const bytes = 3 * n * n * 2;
    const e = roofline({ flops, bytes, dtype: "bf16", unit: "matrix" }, a100);
    const compute = flops / (312e12 * 0.7);
    expect(e.bound).toBe("compute");
    expect(e.computeSeconds).toBeCloseTo(compute, 12);
    expect(e.memorySeconds).toBeCloseTo(bytes / (2039e9 * 0.8), 12);
    expect(e.seconds).toBeCloseTo(compute + 4e-6, 12);
  });

  it("an elementwise add is memory-bound and runs on the fp32 vector units", () => {
    // 2^28 bf16 elements: read 2, write 1 → 3 × 2^28 × 2 bytes; 2^28 FLOPs at 0.5 × 19.5 TFLOP/s.
    const n = 2 ** 28;
    const e = roofline({ flops: n, bytes: 3 * n * 2, dtype: "bf16", unit: "vector" }, a100);
    const memory = (3 * n * 2) / (2039e9 * 0.8);
    expect(e.bound).toBe("memory");
    expect(e.computeSeconds).toBeCloseTo(n / (19.5e12 * 0.5), 12);
    expect(e.seconds).toBeCloseTo(memory + 4e-6, 12);
  });

  it("a view costs nothing, not even a launch", () => {
    expect(roofline({ flops: 0, bytes: 0, dtype: "f32", unit: "vector" }, a100).seconds).toBe(0);
  });

  it("f32 matmuls use the fp32 rate, 16-bit ones their tensor-core rate", () => {
    expect(peakFormat("f32", "matrix")).toBe("fp32");
    expect(peakFormat("bf16", "matrix")).toBe("bf16");
    expect(peakFormat("f16", "matrix")).toBe("fp16");
    expect(peakFormat("bf16", "vector")).toBe("fp32");
  });
});
