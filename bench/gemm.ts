// bench/gemm: fp32 GEMM throughput of the native addon's synchronous sgemm (OpenBLAS or the portable fallback)
// on square sizes, and the best GFLOP/s seen as this machine's practical peak. Prints one JSON object; run with
// `npm run bench:gemm`. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are taken from the environment as they are.
import { nativeAddonPath, nativeBuildInfo, sgemm } from "../src/native/binding.js";

const SIZES = [256, 512, 1024, 2048];

function randomArray(n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return a;
}

// Median and best of `runs` timed calls after one warm-up, with enough runs that each size takes ~1 s or more.
function measure(n: number): { n: number; runs: number; medianMs: number; gflops: number; bestGflops: number } {
  const a = randomArray(n * n);
  const b = randomArray(n * n);
  const c = new Float32Array(n * n);
  const flop = 2 * n ** 3;
  const run = (): number => {
    const t0 = performance.now();
    sgemm(false, false, n, n, n, 1, a, b, 0, c);
    return performance.now() - t0;
  };
  const warm = run();
  const runs = Math.max(3, Math.min(50, Math.ceil(1000 / Math.max(warm, 1e-3))));
  const ms = Array.from({ length: runs }, run).sort((x, y) => x - y);
  const median = ms[Math.floor(runs / 2)]!;
  const gflops = (t: number): number => Number((flop / (t * 1e6)).toFixed(1));
  return { n, runs, medianMs: Number(median.toFixed(3)), gflops: gflops(median), bestGflops: gflops(ms[0]!) };
}

const info = nativeBuildInfo();
const results = SIZES.map(measure);
console.log(
  JSON.stringify(
    {
      bench: "gemm",
      node: process.version,
      addon: nativeAddonPath(),
      blas: info.blas,
      compiler: info.compiler,
      threads: info.threads,
      openblasCoretype: process.env.OPENBLAS_CORETYPE ?? null,
      openblasL2Size: process.env.OPENBLAS_L2_SIZE ?? null,
      sgemm: results,
      bestGflops: Math.max(...results.map((r) => r.bestGflops)),
    },
    null,
    2,
  ),
);
