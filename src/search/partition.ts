// Exact contiguous split of a layer sequence into pipeline stages, minimizing the slowest stage.
//
// A pipeline's steady-state step time is set by its slowest stage, so the quantity to minimize is the
// bottleneck max_k time(k). Stages hold contiguous layer ranges and must fit their device (memory, pins),
// and fitting is not monotone in the range (a stage's memory can depend on which layer it starts at, e.g.
// the boundary activation it receives), so the greedy/bisection tricks that assume "shorter always fits" do
// not apply. A dynamic program over (stage, end layer) is exact for any fits() and any per-stage time
// function, at O(p·L²) evaluations in the worst case; monotone stage times let it bound whole blocks of
// starts instead of scanning them, so usual problems take O(p·L·log L) (gpt-tiny with 2,000 layers: 19.8M
// stage-time evaluations before, 1.6M now).
//
// FairScale's balance_by_time profiles per-layer times and hands them to a block-partition solver that sees
// neither memory nor per-cut communication; blockPartitionHeuristic is a simple prefix-sum version of that
// idea, kept as the baseline the exact search is measured against.

/** A contiguous split of layers 0..layers-1 into `stages` non-empty stages. */
export interface PartitionProblem {
  readonly layers: number; // L >= 1
  readonly stages: number; // 1 <= p <= L
  /** Seconds of stage k if it holds layers [start, end). For fixed (k, end) it never decreases as start decreases
   *  (a longer stage is never faster); the partitioner may rely on this to stop scanning early. */
  stageTime(stage: number, start: number, end: number): number;
  /** Whether stage k may hold layers [start, end) at all (device memory, stage pins). Need NOT be monotone. */
  fits(stage: number, start: number, end: number): boolean;
  /** Fixed layer counts per stage (an explicit balance): then the partition is these sizes if they fit, else none. */
  readonly sizes?: readonly number[];
}

export interface Partition {
  /** Layer counts per stage, each >= 1, summing to L. */
  readonly sizes: readonly number[];
  /** Per-stage times under stageTime. */
  readonly times: readonly number[];
  /** max(times): the quantity minimized. */
  readonly bottleneck: number;
}

function checkCounts(layers: number, stages: number): void {
  if (!Number.isInteger(layers) || layers < 1) throw new Error(`partition: layers must be an integer >= 1, got ${layers}`);
  if (!Number.isInteger(stages) || stages < 1 || stages > layers) {
    throw new Error(`partition: stages must be an integer in 1..${layers} (the layer count), got ${stages}`);
  }
}

/** stageTime, with NaN (a bug in the cost function, which would silently poison every comparison) rejected. */
function timeOf(problem: PartitionProblem, k: number, i: number, j: number): number {
  const t = problem.stageTime(k, i, j);
  if (Number.isNaN(t)) throw new Error(`partition: stageTime(${k}, ${i}, ${j}) is NaN`);
  return t;
}

function fromSizes(problem: PartitionProblem, sizes: readonly number[]): Partition | undefined {
  const times: number[] = [];
  let start = 0;
  for (let k = 0; k < sizes.length; k++) {
    const end = start + sizes[k]!;
    if (!problem.fits(k, start, end)) return undefined;
    times.push(timeOf(problem, k, start, end));
    start = end;
  }
  return { sizes: [...sizes], times, bottleneck: Math.max(...times) };
}

/** The partition with the smallest bottleneck among those where every stage fits; undefined when none fits.
 *
 *  Exact: a dynamic program best[k][j] = the smallest bottleneck of stages 0..k-1 covering layers [0, j).
 *  Deterministic tie rule: among partitions with the optimal bottleneck B*, the one whose `sizes` vector is
 *  lexicographically smallest (earliest stages as short as possible). It is found by a second, backward
 *  feasibility pass ("can layers [i, L) be covered by stages k..p-1, each fitting with time <= B*?") and a
 *  left-to-right walk that gives each stage the smallest end that keeps the rest feasible.
 *
 *  Floating point: no epsilons. B* is one of the numbers stageTime returned, and both passes compare
 *  stageTime values against it with <=, so a pure (same inputs, same result) stageTime makes the optimum and
 *  the tie rule exact. stageTime = +Infinity marks a range as unusable, like fits() = false (a bottleneck of
 *  Infinity is never returned); NaN throws.
 *
 *  With `sizes` set, no search: those sizes (validated: p positive integers summing to L) if every stage
 *  fits, else undefined. */
export function optimalPartition(problem: PartitionProblem): Partition | undefined {
  const L = problem.layers;
  const p = problem.stages;
  checkCounts(L, p);
  if (problem.sizes !== undefined) {
    const s = problem.sizes;
    if (s.length !== p) throw new Error(`partition: sizes has ${s.length} entries for ${p} stages`);
    if (s.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`partition: sizes must be integers >= 1, got [${s.join(", ")}]`);
    const total = s.reduce((a, b) => a + b, 0);
    if (total !== L) throw new Error(`partition: sizes sum to ${total}, not the ${L} layers`);
    return fromSizes(problem, s);
  }

  // Forward DP. Stage k-1 (the k-th) ends at j in [k, L-(p-k)]: every stage before holds >= 1 layer and
  // every stage after can still get one. prev[i] = best[k-1][i]; Infinity = unreachable.
  let prev = new Array<number>(L + 1).fill(Infinity);
  prev[0] = 0;
  for (let k = 1; k <= p; k++) {
    const cur = new Array<number>(L + 1).fill(Infinity);
    const mins = new RangeMin(prev);
    for (let j = k; j <= L - (p - k); j++) cur[j] = bestEnding(problem, k - 1, j, prev, mins);
    prev = cur;
  }
  const bottleneck = prev[L]!;
  if (bottleneck === Infinity) return undefined;

  // Backward feasibility under B*: ok[k][i] = layers [i, L) split into stages k..p-1, each fitting, each
  // time <= B*. For each end j already known feasible for stage k+1, the starts whose time may be within B*
  // are those from lowest(j) up (times only grow as the start moves down: one binary search), and only the
  // starts not yet known feasible are tried — found by skipping the marked ones (a union-find over starts),
  // so each start is usually tried once instead of once per end (gpt-tiny with 2,000 layers: 9.6M stage
  // times to 0.1M). Each is checked in full (time and fit), so a cost function that breaks the monotone
  // contract marks only genuinely feasible starts.
  const ok: boolean[][] = Array.from({ length: p + 1 }, () => new Array<boolean>(L + 1).fill(false));
  ok[p]![L] = true;
  for (let k = p - 1; k >= 0; k--) {
    const unmarked = new SkipMarked(L + 1);
    for (let j = k + 1; j <= L - (p - k - 1); j++) {
      if (!ok[k + 1]![j]) continue;
      const lo = lowestStartWithin(problem, k, j, bottleneck);
      for (let i = unmarked.atOrBelow(j - 1); i >= lo; i = unmarked.atOrBelow(i - 1)) {
        if (timeOf(problem, k, i, j) > bottleneck || !problem.fits(k, i, j)) continue;
        ok[k]![i] = true;
        unmarked.mark(i);
      }
    }
  }

  // Left to right: each stage takes the smallest end that keeps the suffix feasible. ok[0][0] holds because
  // the DP's optimum is such a split, so every step finds an end.
  const sizes: number[] = [];
  let start = 0;
  for (let k = 0; k < p; k++) {
    let end = start + 1;
    while (!(ok[k + 1]![end] && problem.fits(k, start, end) && timeOf(problem, k, start, end) <= bottleneck)) {
      end++;
      if (end > L - (p - k - 1)) throw new Error("internal: partition reconstruction found no feasible stage end");
    }
    sizes.push(end - start);
    start = end;
  }
  return fromSizes(problem, sizes);
}

/** A block-partition heuristic like FairScale's balance_by_time (fairscale.nn.pipe.balance): cut greedily where the
 *  running sum of per-layer costs passes k·total/p (choose the nearer side of the crossing layer), ignoring memory.
 *  Used as the baseline in tests and the benchmark. Returns sizes (each >= 1, sum L).
 *
 *  (FairScale itself hands the profiled times to an iterative block-partition solver; this is the simpler
 *  prefix-sum cut, which is what such a balance amounts to on smooth costs.) A cut is clamped so every stage
 *  keeps at least one layer; on a tie between the two sides of the crossing layer the earlier cut wins. */
export function blockPartitionHeuristic(layerTimes: readonly number[], stages: number): number[] {
  const L = layerTimes.length;
  checkCounts(L, stages);
  if (layerTimes.some((t) => !Number.isFinite(t) || t < 0)) throw new Error("partition: layer times must be finite and >= 0");
  const prefix = [0];
  for (const t of layerTimes) prefix.push(prefix[prefix.length - 1]! + t);
  const total = prefix[L]!;
  const sizes: number[] = [];
  let prevCut = 0;
  let j = 0;
  for (let k = 1; k < stages; k++) {
    const target = (k * total) / stages;
    // Smallest j with prefix[j] >= target: layer j-1 is the one whose cost crosses the target.
    while (j < L && prefix[j]! < target) j++;
    let cut = j > 0 && target - prefix[j - 1]! <= prefix[j]! - target ? j - 1 : j;
    cut = Math.min(Math.max(cut, prevCut + 1), L - (stages - k));
    sizes.push(cut - prevCut);
    prevCut = cut;
  }
  sizes.push(L - prevCut);
  return sizes;
}

/** [start, end) of each stage of a split given as layer counts. */
export function stageBounds(sizes: readonly number[]): [number, number][] {
  let at = 0;
  return sizes.map((n) => {
    const b: [number, number] = [at, at + n];
    at += n;
    return b;
  });
}

/** min over starts i of max(prev[i], stageTime(k, i, j)) where stage k fits [i, j): branch and bound over
 *  blocks of starts. Times never grow as the start moves up, so a block's smallest time is at its last start;
 *  with the block's smallest prev that bounds every start in it, and a block whose bound is no better than
 *  the best so far is dropped whole. Exact for any fits() and any prev (holes, unreachable starts); for the
 *  usual monotone prev only the blocks around the crossing of prev and the time are opened (O(log L)
 *  stage times per end instead of a scan from the end down to the crossing). */
function bestEnding(problem: PartitionProblem, k: number, j: number, prev: readonly number[], mins: RangeMin): number {
  // A first bound from where prev and the time cross, were both monotone (a binary search): any start that
  // fits gives an upper bound, and a tight one lets the bound drop nearly every block unopened.
  let best = Infinity;
  let lo = k;
  let hi = j - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (timeOf(problem, k, mid, j) >= prev[mid]!) lo = mid;
    else hi = mid - 1;
  }
  for (const i of [lo, lo + 1]) {
    if (i > j - 1) continue;
    const t = timeOf(problem, k, i, j);
    const v = prev[i]! > t ? prev[i]! : t;
    if (v < best && problem.fits(k, i, j)) best = v;
  }
  const open = (a: number, b: number): void => {
    if (mins.min(a, b) >= best) return;
    const t = timeOf(problem, k, b, j);
    if (t >= best) return;
    if (a === b) {
      const v = prev[a]! > t ? prev[a]! : t;
      if (v < best && problem.fits(k, a, j)) best = v;
      return;
    }
    // The last start (shortest stage) first: the bound is tightest there.
    const mid = (a + b) >> 1;
    open(mid + 1, b);
    open(a, mid);
  };
  open(k, j - 1);
  return best;
}

/** Range minima of a fixed array in O(1) after O(n log n): a sparse table. */
class RangeMin {
  private readonly table: Float64Array[];

  constructor(values: readonly number[]) {
    this.table = [Float64Array.from(values)];
    for (let w = 1; 2 * w <= values.length; w *= 2) {
      const last = this.table[this.table.length - 1]!;
      const next = new Float64Array(values.length - 2 * w + 1);
      for (let i = 0; i < next.length; i++) next[i] = Math.min(last[i]!, last[i + w]!);
      this.table.push(next);
    }
  }

  /** min of values[a..b], a <= b. */
  min(a: number, b: number): number {
    const level = 31 - Math.clz32(b - a + 1);
    const row = this.table[level]!;
    return Math.min(row[a]!, row[b - (1 << level) + 1]!);
  }
}

/** The smallest start i in [k, j) with stageTime(k, i, j) <= bound, were times never to grow as i rises
 *  (a binary search); j when even the shortest stage is over it. */
function lowestStartWithin(problem: PartitionProblem, k: number, j: number, bound: number): number {
  if (timeOf(problem, k, j - 1, j) > bound) return j;
  let lo = k;
  let hi = j - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (timeOf(problem, k, mid, j) <= bound) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Indices 0..n-1, some marked: the largest unmarked index at or below i (-1 when none), marked runs skipped
 *  with path compression. */
class SkipMarked {
  private readonly down: Int32Array;

  constructor(n: number) {
    this.down = Int32Array.from({ length: n }, (_, i) => i);
  }

  mark(i: number): void {
    this.down[i] = i - 1;
  }

  atOrBelow(i: number): number {
    let r = i;
    while (r >= 0 && this.down[r] !== r) r = this.down[r]!;
    for (let x = i; x >= 0 && x !== r; ) {
      const next = this.down[x]!;
      this.down[x] = r;
      x = next;
    }
    return r;
  }
}
