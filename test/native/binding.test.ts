// The native addon through its typed binding: build info, sgemm against a naive multiply, argument checks,
// the async worker not blocking the event loop, and log lines from a native thread reaching JS in order.
import { existsSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import {
  nativeAddonPath,
  nativeBuildInfo,
  nativeLogTest,
  setNativeLogger,
  sgemm,
  sgemmAsync,
} from "../../src/native/binding.js";
import { rng } from "../support/prng.js";

function randomArray(n: number, next: () => number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = next() * 2 - 1;
  return a;
}

// alpha·op(A)·op(B) + beta·C in float64, straight from the definition.
function naiveSgemm(
  transA: boolean, transB: boolean, m: number, n: number, k: number, alpha: number,
  a: Float32Array, b: Float32Array, beta: number, c: Float32Array,
): Float64Array {
  const out = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) {
        const aip = transA ? a[p * m + i]! : a[i * k + p]!;
        const bpj = transB ? b[j * k + p]! : b[p * n + j]!;
        s += aip * bpj;
      }
      out[i * n + j] = alpha * s + (beta === 0 ? 0 : beta * c[i * n + j]!);
    }
  }
  return out;
}

// Largest error relative to the largest reference magnitude (elementwise ratios blow up where sums cancel).
function maxRelativeError(got: Float32Array, want: Float64Array): number {
  let err = 0;
  let scale = 0;
  for (let i = 0; i < want.length; i++) {
    err = Math.max(err, Math.abs(got[i]! - want[i]!));
    scale = Math.max(scale, Math.abs(want[i]!));
  }
  return scale === 0 ? err : err / scale;
}

describe("native addon", () => {
  afterEach(() => setNativeLogger(null));

  it("reports how it was built", () => {
    const info = nativeBuildInfo();
    console.log(`native addon ${nativeAddonPath()}: ${JSON.stringify(info)}`);
    expect(["openblas", "fallback"]).toContain(info.blas);
    expect(info.napiVersion).toBe(8);
    expect(info.compiler).toMatch(/\S/);
    expect(Number.isInteger(info.threads)).toBe(true);
    expect(info.threads).toBeGreaterThanOrEqual(0);
    // The default build finds Debian's OpenBLAS when it is installed (FSM_NATIVE_PATH may name another build).
    const debianOpenblas = ["/usr/include/x86_64-linux-gnu/cblas.h", "/usr/lib/x86_64-linux-gnu/libopenblas.so"];
    if (!process.env.FSM_NATIVE_PATH && debianOpenblas.every((p) => existsSync(p))) {
      expect(info.blas).toBe("openblas");
    }
  });

  // Small products and large ones whose B stays in cache run as direct products where OpenBLAS's kernels are
  // narrower than the CPU's (gemm.cc), the rest on OpenBLAS: [300, 70, 120] is past the small bound with a B of
  // 33 KB; alpha 1 and beta 1 is the direct product's accumulation.
  const shapes: [number, number, number][] = [[1, 1, 1], [7, 5, 3], [33, 65, 17], [64, 48, 300], [130, 257, 260], [300, 70, 120]];
  for (const transA of [false, true]) {
    for (const transB of [false, true]) {
      it(`sgemm matches a naive multiply (transA=${transA}, transB=${transB})`, () => {
        const next = rng(17 + Number(transA) * 2 + Number(transB));
        for (const [m, n, k] of shapes) {
          for (const [alpha, beta] of [[1, 0], [0.75, -1.5], [-2, 1], [1, 1], [-0.5, 0]] as const) {
            const a = randomArray(m * k, next);
            const b = randomArray(k * n, next);
            const c = randomArray(m * n, next);
            const want = naiveSgemm(transA, transB, m, n, k, alpha, a, b, beta, c);
            sgemm(transA, transB, m, n, k, alpha, a, b, beta, c);
            const err = maxRelativeError(c, want);
            expect(err, `${m}x${n}x${k} alpha=${alpha} beta=${beta}: relative error ${err}`).toBeLessThan(1e-5);
          }
        }
      });
    }
  }

  it("sgemm with beta = 0 ignores NaNs in C, and with k = 0 only scales C", () => {
    const c = new Float32Array([NaN, NaN, NaN, NaN]);
    sgemm(false, false, 2, 2, 1, 1, new Float32Array([1, 2]), new Float32Array([3, 4]), 0, c);
    expect([...c]).toEqual([3, 4, 6, 8]);
    const d = new Float32Array([1, 2, 3, 4]);
    sgemm(false, false, 2, 2, 0, 1, new Float32Array(0), new Float32Array(0), 2, d);
    expect([...d]).toEqual([2, 4, 6, 8]);
  });

  it("sgemm rejects wrong sizes and types with a clear message", () => {
    const a = new Float32Array(6);
    const b = new Float32Array(12);
    const c = new Float32Array(8);
    expect(() => sgemm(false, false, 2, 4, 3, 1, a, b, 0, c)).not.toThrow();
    expect(() => sgemm(false, false, 2, 4, 3, 1, new Float32Array(5), b, 0, c)).toThrow(
      new RangeError("sgemm: A has 5 elements, expected 2 x 3 = 6"),
    );
    expect(() => sgemm(false, true, 2, 4, 3, 1, a, new Float32Array(11), 0, c)).toThrow(
      new RangeError("sgemm: B has 11 elements, expected 4 x 3 = 12"),
    );
    expect(() => sgemm(false, false, 2, 4, 3, 1, a, b, 0, new Float32Array(9))).toThrow(
      new RangeError("sgemm: C has 9 elements, expected 2 x 4 = 8"),
    );
    expect(() => sgemm(false, false, -2, 4, 3, 1, a, b, 0, c)).toThrow(RangeError);
    expect(() => sgemm(false, false, 2.5, 4, 3, 1, a, b, 0, c)).toThrow(/M must be an integer/);
    expect(() => sgemm(false, false, 2, 4, 3, 1, new Float64Array(6) as unknown as Float32Array, b, 0, c)).toThrow(
      new TypeError("sgemm: A must be a Float32Array"),
    );
    expect(() => sgemm(0 as unknown as boolean, false, 2, 4, 3, 1, a, b, 0, c)).toThrow(
      new TypeError("sgemm: transA must be a boolean"),
    );
    const shared = new Float32Array(10);
    expect(() => sgemm(false, false, 2, 4, 3, 1, shared.subarray(0, 6), b, 0, shared.subarray(2))).toThrow(
      new RangeError("sgemm: C must not share memory with A or B"),
    );
  });

  it("sgemmAsync computes off the main thread: a timer fires before it resolves", async () => {
    const n = 256;
    const next = rng(5);
    const a = randomArray(n * n, next);
    const b = randomArray(n * n, next);
    const c = new Float32Array(n * n);
    const want = naiveSgemm(false, false, n, n, n, 1, a, b, 0, c);
    let timerFiredFirst: boolean | undefined;
    const timer = new Promise<void>((done) =>
      setTimeout(() => {
        timerFiredFirst ??= true;
        done();
      }, 0),
    );
    // Enough repeats to run well past one event-loop turn even with the portable fallback on a fast machine.
    const seconds = await sgemmAsync(false, false, n, n, n, 1, a, b, 0, c, 200);
    timerFiredFirst ??= false;
    await timer;
    console.log(`sgemmAsync: 200 × ${n}³ in ${seconds.toFixed(3)} s`);
    expect(seconds).toBeGreaterThan(0);
    expect(timerFiredFirst).toBe(true);
    expect(maxRelativeError(c, want)).toBeLessThan(1e-5);
    await expect(sgemmAsync(false, false, n, n, n, 1, a, b, 0, c, 0)).rejects.toThrow(RangeError);
  });

  it("log lines from a native thread reach the JS logger in order", async () => {
    const lines: string[] = [];
    setNativeLogger((level, message) => lines.push(`${level}: ${message}`));
    await nativeLogTest(1000);
    expect(lines).toHaveLength(1000);
    expect(lines[0]).toBe("info: logTest 1 of 1000");
    expect(lines.every((l, i) => l === `info: logTest ${i + 1} of 1000`)).toBe(true);
    setNativeLogger(null);
    await expect(nativeLogTest(1)).rejects.toThrow(/no logger is set/);
  });

  it("a worker terminated while its native thread is logging goes away cleanly", async () => {
    // Node frees a thread-safe function with its environment; the addon must stop and join its logging thread
    // first. Run a few times: a use-after-free here aborts the whole process, not just this test.
    const source = `
      const { parentPort, workerData } = require("node:worker_threads");
      const addon = require(workerData);
      let lines = 0;
      addon.setLogger(() => { if (++lines === 100) parentPort.postMessage("logging"); });
      addon.logTest(1000000);`;
    for (let i = 0; i < 5; i++) {
      const worker = new Worker(source, { eval: true, workerData: nativeAddonPath() });
      await new Promise<void>((resolve, reject) => {
        worker.once("error", reject);
        worker.once("message", () => resolve());
      });
      expect(await worker.terminate()).toBe(1);
    }
  });
});
