// Shared by the benchmarks: the median of repeated timings after a warm-up, so one noisy run on a shared
// machine does not decide a figure.

export function medianMs(fn: () => void, runs: number): number {
  fn();
  const ts: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  ts.sort((a, b) => a - b);
  return Number(ts[Math.floor(ts.length / 2)]!.toFixed(2));
}
