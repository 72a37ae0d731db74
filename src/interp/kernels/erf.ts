// erf(x) to about 1e-15 absolute error, for the exact (erf-based) GELU that PyTorch uses by default.
// |x| < 2.5: the Maclaurin series (alternating, at most ~40 terms, cancellation costs ~3 digits);
// |x| ≥ 2.5: erfc by its continued fraction (Lentz-free backward evaluation, 60 terms), which converges
// fast away from 0; beyond |x| = 6, erf is ±1 to double precision.

const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  if (a >= 6) return Math.sign(x);
  if (a < 2.5) {
    // erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1))
    const x2 = x * x;
    let term = x; // (-1)^n x^(2n+1) / n!
    let sum = x;
    for (let n = 1; n < 100; n++) {
      term *= -x2 / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return TWO_OVER_SQRT_PI * sum;
  }
  // erfc(a) = exp(-a²)/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + 2/(a + ...)))))
  let f = a;
  for (let k = 60; k >= 1; k--) f = a + k / 2 / f;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}
