// The exact pipeline-stage partitioner against brute force (every composition of L into p parts, with
// non-monotone memory limits, per-cut communication and stage pins), known answers, input validation, and
// the prefix-sum heuristic it is meant to beat.
import { describe, expect, it } from "vitest";
import { blockPartitionHeuristic, optimalPartition, type PartitionProblem } from "../../src/search/partition.js";
import { rng } from "../support/prng.js";

/** Left-to-right sum of xs[i..j): for non-negative terms, rounding keeps it non-decreasing as i decreases. */
const rangeSum = (xs: readonly number[], i: number, j: number): number => {
  let s = 0;
  for (let x = i; x < j; x++) s += xs[x]!;
  return s;
};

/** Every composition of n into k positive parts, in lexicographic order. */
function compositions(n: number, k: number): number[][] {
  if (k === 1) return [[n]];
  const out: number[][] = [];
  for (let first = 1; first <= n - (k - 1); first++) for (const rest of compositions(n - first, k - 1)) out.push([first, ...rest]);
  return out;
}

/** Brute force: the minimum bottleneck over fitting compositions, and the lexicographically first one reaching it. */
function bruteForce(pr: PartitionProblem): { sizes: number[]; bottleneck: number } | undefined {
  let best: { sizes: number[]; bottleneck: number } | undefined;
  for (const sizes of compositions(pr.layers, pr.stages)) {
    let start = 0;
    let worst = -Infinity;
    let fits = true;
    for (let k = 0; k < sizes.length && fits; k++) {
      const end = start + sizes[k]!;
      fits = pr.fits(k, start, end);
      worst = Math.max(worst, pr.stageTime(k, start, end));
      start = end;
    }
    // Strict <: compositions come in lexicographic order, so the first optimum found is the smallest.
    if (fits && (best === undefined || worst < best.bottleneck)) best = { sizes, bottleneck: worst };
  }
  return best;
}

/** A uniform-cost problem with no memory limit: stage time = layer count × unit. */
const uniform = (layers: number, stages: number, unit = 1): PartitionProblem => ({
  layers,
  stages,
  stageTime: (_k, i, j) => (j - i) * unit,
  fits: () => true,
});

const additive = (times: readonly number[], stages: number): PartitionProblem => ({
  layers: times.length,
  stages,
  stageTime: (_k, i, j) => rangeSum(times, i, j),
  fits: () => true,
});

/** Random per-layer times t, per-cut communication c (none after the last layer) and memory m, drawn in that
 *  order; small integers when `integer`, so that equal bottlenecks (and the tie rule) are common. */
function layerCosts(r: () => number, L: number, integer: boolean): { t: number[]; c: number[]; m: number[] } {
  const draw = (scale: number) => (integer ? Math.floor(r() * (scale + 1)) : r() * scale);
  const t = Array.from({ length: L }, () => draw(3));
  const c = Array.from({ length: L + 1 }, (_, j) => (j === L ? 0 : draw(1)));
  const m = Array.from({ length: L }, () => r());
  return { t, c, m };
}

describe("optimalPartition against brute force", () => {
  it("1000 random instances with per-cut communication, non-monotone memory and stage pins", () => {
    const r = rng(20240611);
    const int = (n: number) => Math.floor(r() * n);
    let feasible = 0;
    let infeasible = 0;
    let ties = 0;
    for (let trial = 0; trial < 1000; trial++) {
      const L = 1 + int(12);
      const p = 1 + int(Math.min(L, 5));
      // Half the instances use small integer costs, so equal bottlenecks (and the tie rule) are common.
      const integer = trial % 2 === 0;
      const { t, c, m } = layerCosts(r, L, integer);
      const a = Array.from({ length: L }, () => r() * 0.3);
      const inbound = Array.from({ length: L }, () => r() * 1.5); // received at the stage's first layer
      const total = rangeSum(m, 0, L) + rangeSum(a, 0, L);
      const cap = Array.from({ length: p }, () => (r() < 0.4 ? Infinity : (0.8 + 2 * r()) * (total / p + 0.5)));
      const pins: [number, number][] = [];
      if (r() < 0.3) for (let n = 1 + int(2); n > 0; n--) pins.push([int(L), int(p)]);
      const problem: PartitionProblem = {
        layers: L,
        stages: p,
        stageTime: (_k, i, j) => rangeSum(t, i, j) + c[j]!,
        fits: (k, i, j) => {
          for (const [x, y] of pins) if ((i <= x && x < j) !== (k === y)) return false;
          return rangeSum(m, i, j) + (p - k) * rangeSum(a, i, j) + inbound[i]! <= cap[k]!;
        },
      };
      const brute = bruteForce(problem);
      const got = optimalPartition(problem);
      const where = `trial ${trial}: L=${L} p=${p}`;
      if (brute === undefined) {
        expect(got, where).toBeUndefined();
        infeasible++;
        continue;
      }
      feasible++;
      expect(got, where).toBeDefined();
      expect(got!.bottleneck, where).toBe(brute.bottleneck);
      expect(got!.sizes, where).toEqual(brute.sizes);
      // Times are the stages' own stageTime values and every stage fits.
      let start = 0;
      got!.sizes.forEach((s, k) => {
        expect(s, where).toBeGreaterThanOrEqual(1);
        expect(problem.fits(k, start, start + s), where).toBe(true);
        expect(got!.times[k], where).toBe(problem.stageTime(k, start, start + s));
        start += s;
      });
      expect(start, where).toBe(L);
      expect(got!.bottleneck, where).toBe(Math.max(...got!.times));
      // A bound the optimum is under gives the same split; one it is not under gives none.
      const above = brute.bottleneck + (integer ? 0.5 : 1e-9);
      expect(optimalPartition({ ...problem, below: above })?.sizes, where).toEqual(brute.sizes);
      expect(optimalPartition({ ...problem, below: brute.bottleneck }), where).toBeUndefined();
      // Count instances where several compositions share the optimum, so the tie rule was really exercised.
      const optima = compositions(L, p).filter((sizes) => {
        let st = 0;
        return sizes.every((s, k) => {
          const ok = problem.fits(k, st, st + s) && problem.stageTime(k, st, st + s) <= brute.bottleneck;
          st += s;
          return ok;
        });
      });
      if (optima.length > 1) ties++;
    }
    // The generator must produce both outcomes and plenty of ties, or the comparisons above prove little.
    expect(feasible).toBeGreaterThan(600);
    expect(infeasible).toBeGreaterThan(150);
    expect(ties).toBeGreaterThan(100);
  });
});

/** The same optimum and tie rule by full scans, no pruning: O(p·L²) stage times, for sizes brute force cannot
 *  reach. */
function plainPartition(pr: PartitionProblem): { sizes: number[]; bottleneck: number } | undefined {
  const { layers: L, stages: p } = pr;
  let prev = new Array<number>(L + 1).fill(Infinity);
  prev[0] = 0;
  for (let k = 1; k <= p; k++) {
    const cur = new Array<number>(L + 1).fill(Infinity);
    for (let j = k; j <= L; j++) for (let i = k - 1; i < j; i++) if (prev[i]! < Infinity && pr.fits(k - 1, i, j)) cur[j] = Math.min(cur[j]!, Math.max(prev[i]!, pr.stageTime(k - 1, i, j)));
    prev = cur;
  }
  const b = prev[L]!;
  if (b === Infinity) return undefined;
  const ok = Array.from({ length: p + 1 }, () => new Array<boolean>(L + 1).fill(false));
  ok[p]![L] = true;
  for (let k = p - 1; k >= 0; k--) for (let j = 1; j <= L; j++) if (ok[k + 1]![j]) for (let i = 0; i < j; i++) if (pr.fits(k, i, j) && pr.stageTime(k, i, j) <= b) ok[k]![i] = true;
  const sizes: number[] = [];
  let start = 0;
  for (let k = 0; k < p; k++) {
    let end = start + 1;
    while (!(ok[k + 1]![end] && pr.fits(k, start, end) && pr.stageTime(k, start, end) <= b)) end++;
    sizes.push(end - start);
    start = end;
  }
  return { sizes, bottleneck: b };
}

describe("optimalPartition against full scans, at sizes brute force cannot reach", () => {
  it("150 random instances of 40-160 layers on up to 8 stages, with non-monotone memory and stage pins", () => {
    const r = rng(7);
    const int = (n: number) => Math.floor(r() * n);
    let feasible = 0;
    for (let trial = 0; trial < 150; trial++) {
      const L = 40 + int(121);
      const p = 1 + int(8);
      const integer = trial % 2 === 0;
      const { t, c, m } = layerCosts(r, L, integer);
      const inbound = Array.from({ length: L }, () => r() * 3);
      const cap = Array.from({ length: p }, () => (r() < 0.3 ? Infinity : (0.9 + r()) * (rangeSum(m, 0, L) / p + 1)));
      const pins: [number, number][] = r() < 0.3 ? [[int(L), int(p)]] : [];
      const problem: PartitionProblem = {
        layers: L,
        stages: p,
        stageTime: (_k, i, j) => rangeSum(t, i, j) + c[j]!,
        fits: (k, i, j) => pins.every(([x, y]) => (i <= x && x < j) === (k === y)) && rangeSum(m, i, j) + inbound[i]! <= cap[k]!,
      };
      const want = plainPartition(problem);
      const got = optimalPartition(problem);
      const where = `trial ${trial}: L=${L} p=${p}`;
      if (want === undefined) {
        expect(got, where).toBeUndefined();
        continue;
      }
      feasible++;
      expect(got?.bottleneck, where).toBe(want.bottleneck);
      expect(got?.sizes, where).toEqual(want.sizes);
    }
    expect(feasible).toBeGreaterThan(75);
  });
});

describe("optimalPartition known answers", () => {
  it("uniform 24 layers on 4 stages: 6 each", () => {
    const got = optimalPartition(uniform(24, 4))!;
    expect(got.sizes).toEqual([6, 6, 6, 6]);
    expect(got.times).toEqual([6, 6, 6, 6]);
    expect(got.bottleneck).toBe(6);
  });

  it("10 uniform layers on 3 stages: bottleneck 4, lexicographically smallest sizes [2, 4, 4]", () => {
    const got = optimalPartition(uniform(10, 3, 0.5))!;
    expect(got.bottleneck).toBe(2); // 4 layers × 0.5 s
    expect(got.sizes).toEqual([2, 4, 4]);
    expect(optimalPartition(uniform(10, 3))!.bottleneck).toBe(4);
  });

  it("a heavy last layer gets a stage of its own", () => {
    const got = optimalPartition(additive([1, 1, 1, 1, 1, 1, 20], 3))!;
    expect(got.sizes[2]).toBe(1);
    expect(got.bottleneck).toBe(20);
    // Among the equal-bottleneck splits of the first six layers, the earliest stages are shortest.
    expect(got.sizes).toEqual([1, 5, 1]);
  });

  it("one stage holds everything; p = L gives one layer each", () => {
    expect(optimalPartition(additive([3, 1, 4], 1))).toEqual({ sizes: [3], times: [8], bottleneck: 8 });
    expect(optimalPartition(additive([3, 1, 4], 3))).toEqual({ sizes: [1, 1, 1], times: [3, 1, 4], bottleneck: 4 });
  });

  it("memory that rules out the balanced split moves the cut", () => {
    // Stage 0 can hold at most 2 layers: the 3/3 split is out.
    const problem: PartitionProblem = { ...uniform(6, 2), fits: (k, i, j) => k !== 0 || j - i <= 2 };
    expect(optimalPartition(problem)).toEqual({ sizes: [2, 4], times: [2, 4], bottleneck: 4 });
    expect(optimalPartition({ ...uniform(6, 2), fits: (_k, i, j) => j - i <= 2 })).toBeUndefined();
  });

  it("fixed sizes are returned as given when they fit, undefined when a stage does not", () => {
    const got = optimalPartition({ ...uniform(10, 3), sizes: [5, 3, 2] });
    expect(got).toEqual({ sizes: [5, 3, 2], times: [5, 3, 2], bottleneck: 5 });
    const tight: PartitionProblem = { ...uniform(10, 3), fits: (_k, i, j) => j - i <= 4, sizes: [5, 3, 2] };
    expect(optimalPartition(tight)).toBeUndefined();
    // Without the fixed sizes, the same limits admit a split.
    expect(optimalPartition({ ...tight, sizes: undefined })!.sizes).toEqual([2, 4, 4]);
  });

  it("the inner scan stops early on monotone times", () => {
    let calls = 0;
    const L = 400;
    const p = 16;
    const problem: PartitionProblem = {
      ...uniform(L, p),
      stageTime: (_k, i, j) => {
        calls++;
        return j - i;
      },
    };
    expect(optimalPartition(problem)!.bottleneck).toBe(25);
    // Without the early stop the forward pass alone evaluates Σ_k Σ_j (j - k + 1) = 16 · (385 · 386 / 2) =
    // 1,188,880 ranges; with it, forward + backward + reconstruction stay well under a third of that.
    expect(calls).toBeLessThan(400_000);
  });

  it("splits 100,000 layers with no recursion limit, in time near-linear in the layers", () => {
    let calls = 0;
    const L = 100_000;
    const problem: PartitionProblem = {
      ...uniform(L, 8),
      stageTime: (_k, i, j) => {
        calls++;
        return j - i;
      },
    };
    const got = optimalPartition(problem)!;
    expect(got.bottleneck).toBe(12_500);
    expect(got.sizes).toEqual(new Array(8).fill(12_500));
    // O(p·L·log L) stage times (some 34M: a few times 8 · 100,000 · log₂ 100,000), far from the O(p·L²)
    // scan's 40 billion.
    expect(calls).toBeLessThan(60 * 8 * L);
  });

  it("rejects invalid inputs with a clear message", () => {
    expect(() => optimalPartition(uniform(0, 1))).toThrow(/layers must be an integer >= 1/);
    expect(() => optimalPartition(uniform(2.5, 1))).toThrow(/layers must be an integer/);
    expect(() => optimalPartition(uniform(4, 0))).toThrow(/stages must be an integer in 1\.\.4/);
    expect(() => optimalPartition(uniform(4, 5))).toThrow(/stages must be an integer in 1\.\.4/);
    expect(() => optimalPartition(uniform(4, 1.5))).toThrow(/stages must be an integer/);
    expect(() => optimalPartition({ ...uniform(4, 2), sizes: [4] })).toThrow(/sizes has 1 entries for 2 stages/);
    expect(() => optimalPartition({ ...uniform(4, 2), sizes: [1, 2] })).toThrow(/sizes sum to 3, not the 4 layers/);
    expect(() => optimalPartition({ ...uniform(4, 2), sizes: [5, -1] })).toThrow(/sizes must be integers >= 1/);
    expect(() => optimalPartition({ ...uniform(4, 2), sizes: [1.5, 2.5] })).toThrow(/sizes must be integers >= 1/);
    expect(() => optimalPartition({ ...uniform(4, 2), stageTime: () => NaN })).toThrow(/NaN/);
    expect(() => blockPartitionHeuristic([1, 2], 3)).toThrow(/stages must be an integer in 1\.\.2/);
    expect(() => blockPartitionHeuristic([1, -2], 2)).toThrow(/finite and >= 0/);
  });
});

describe("blockPartitionHeuristic", () => {
  it("cuts at the nearer side of each k·total/p crossing and keeps every stage non-empty", () => {
    expect(blockPartitionHeuristic([1, 1, 1, 1, 1, 1], 3)).toEqual([2, 2, 2]);
    // total 10, target 5: the prefix goes 1, 2, 8 — layer 2 crosses it; 2 is 3 short, 8 is 3 over: the earlier cut.
    expect(blockPartitionHeuristic([1, 1, 6, 2], 2)).toEqual([2, 2]);
    expect(blockPartitionHeuristic([1, 1, 4, 4], 2)).toEqual([3, 1]); // prefix 2 is 3 short, 6 is 1 over: the later cut
    expect(blockPartitionHeuristic([1, 4, 1, 1, 3], 2)).toEqual([2, 3]); // the prefix meets 5 exactly
    expect(blockPartitionHeuristic([0, 0, 0, 0], 4)).toEqual([1, 1, 1, 1]);
    expect(blockPartitionHeuristic([100, 0, 0], 3)).toEqual([1, 1, 1]);
  });
});

describe("optimalPartition versus the heuristic", () => {
  it("is never worse on 500 random skewed instances, and strictly better on some", () => {
    const r = rng(77);
    const int = (n: number) => Math.floor(r() * n);
    let better = 0;
    let sumGain = 0;
    let maxGain = 0;
    const N = 500;
    for (let trial = 0; trial < N; trial++) {
      const L = 4 + int(37);
      const p = 2 + int(Math.min(7, L - 2));
      // A mixture: most layers small, some ten to fifty times bigger (embeddings, heads, attention blocks).
      const times = Array.from({ length: L }, () => (r() < 0.15 ? 10 + 40 * r() : 0.5 + r()));
      const problem = additive(times, p);
      const got = optimalPartition(problem)!;
      const sizes = blockPartitionHeuristic(times, p);
      expect(sizes.length).toBe(p);
      expect(sizes.every((s) => Number.isInteger(s) && s >= 1)).toBe(true);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(L);
      const heuristic = optimalPartition({ ...problem, sizes })!.bottleneck;
      expect(got.bottleneck, `trial ${trial}`).toBeLessThanOrEqual(heuristic);
      const gain = 1 - got.bottleneck / heuristic;
      if (got.bottleneck < heuristic) better++;
      sumGain += gain;
      maxGain = Math.max(maxGain, gain);
    }
    console.log(
      JSON.stringify({ instances: N, strictlyBetterFraction: better / N, meanImprovement: Number((sumGain / N).toFixed(4)), maxImprovement: Number(maxGain.toFixed(4)) }),
    );
    expect(better / N).toBeGreaterThan(0);
  });
});
