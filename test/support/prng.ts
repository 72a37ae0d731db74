// Deterministic PRNG (mulberry32) for randomized tests, so a failing case reproduces from its seed.

export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n values of random sign with magnitudes spread over `decades` decades around 1, so a different
 *  summation order gives different bits. */
export function spreadData(n: number, next: () => number, decades: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (next() * 2 - 1) * 10 ** Math.floor(next() * decades - decades / 2);
  return a;
}
