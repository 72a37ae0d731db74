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
  /** Only a split whose bottleneck is below this is wanted; none (undefined) when the optimum is not. The
   *  search passes what a candidate's split must reach to beat the plans it has kept: the dynamic program
   *  then drops every start that cannot, which ends most hopeless candidates in a few rows. */
  readonly below?: number;
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
    const fixed = fromSizes(problem, s);
    return fixed && problem.below !== undefined && !(fixed.bottleneck < problem.below) ? undefined : fixed;
  }

  // Forward DP. Stage k-1 (the k-th) ends at j in [k, L-(p-k)]: every stage before holds >= 1 layer and
  // every stage after can still get one. prev[i] = best[k-1][i]; Infinity = unreachable.
  // Two rows, swapped: the partitioner runs for thousands of candidates per search, and its garbage showed.
  let prev = new Float64Array(L + 1).fill(Infinity);
  let cur = new Float64Array(L + 1);
  prev[0] = 0;
  // Values at or above the ceiling are as good as unreachable (Infinity without a bound).
  const ceiling = problem.below ?? Infinity;
  const search = new EndingSearch(problem, ceiling);
  for (let k = 1; k <= p; k++) {
    cur.fill(Infinity);
    search.stage(prev);
    let reached = false;
    for (let j = k; j <= L - (p - k); j++) {
      cur[j] = bestEnding(search, k - 1, j);
      if (cur[j]! < ceiling) reached = true;
    }
    // No split of the first k stages fits (under the bound): none of the whole does. Plans that do not fit
    // usually end at the first stage, which holds the most micro-batches; plans that cannot beat the bound
    // end at the first stage whose shortest stages are already slower.
    if (!reached) return undefined;
    [prev, cur] = [cur, prev];
  }
  const bottleneck = prev[L]!;
  if (bottleneck >= ceiling) return undefined;

  // Backward feasibility under B*: ok[k][i] = layers [i, L) split into stages k..p-1, each fitting, each
  // time <= B*. For each end j already known feasible for stage k+1, the starts are tried from the shortest
  // stage down until one's time is over B* (times only grow as the start moves down), and only the
  // starts not yet known feasible are tried — found by skipping the marked ones (a union-find over starts),
  // so each start is usually tried once instead of once per end (gpt-tiny with 2,000 layers: 9.6M stage
  // times to 0.1M). Each is checked in full (time and fit), so a cost function that breaks the monotone
  // contract marks only genuinely feasible starts.
  const ok: Uint8Array[] = Array.from({ length: p + 1 }, () => new Uint8Array(L + 1));
  const unmarked = new SkipMarked(L + 1);
  ok[p]![L] = 1;
  for (let k = p - 1; k >= 0; k--) {
    unmarked.clear();
    for (let j = k + 1; j <= L - (p - k - 1); j++) {
      if (!ok[k + 1]![j]) continue;
      for (let i = unmarked.atOrBelow(j - 1); i >= k; i = unmarked.atOrBelow(i - 1)) {
        // Longer stages (lower starts) are no faster: the first over B* ends this end's starts.
        if (timeOf(problem, k, i, j) > bottleneck) break;
        if (!problem.fits(k, i, j)) continue;
        ok[k]![i] = 1;
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
 *  the best so far is dropped whole. Exact for any fits() and any prev (holes, unreachable starts).
 *
 *  The search starts where prev and the time cross (were both monotone), found by galloping down from the
 *  shortest stage: stages are usually a few layers long (deep pipelines) or the crossing is where the
 *  optimum is, so a tight bound comes after O(log d) stage times, d the distance from the end. Below the
 *  crossing, blocks of doubling width are taken in turn, and the first whose shortest stage is already no
 *  faster than the best ends the scan (every longer stage is slower still); above it, one range minimum of
 *  prev usually rules every start out. (gpt3-175b on 1,024 devices: 8.2M stage times per search with a
 *  binary search over all starts and blocks from the widest down, 3.6M this way.) */
function bestEnding(s: EndingSearch, k: number, j: number): number {
  s.begin(k, j);
  // No start reachable by the stages before: nothing to try.
  if (!s.reachable(k, j - 1)) return Infinity;
  const top = j - 1;
  // Gallop: the largest start whose time reaches prev there (the crossing), between `lo` and `hi`.
  let hi = top;
  let lo = top;
  let step = 1;
  while (lo > k && s.time(lo) < s.prev[lo]!) {
    hi = lo - 1;
    lo = Math.max(k, top - step);
    step *= 2;
  }
  if (s.time(lo) < s.prev[lo]!) hi = lo; // no crossing: every start's time is below its prev
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (s.time(mid) >= s.prev[mid]!) lo = mid;
    else hi = mid - 1;
  }
  s.consider(lo);
  if (lo + 1 <= top) s.consider(lo + 1);
  // Above the crossing: shorter stages, whose prev is usually past the bound already.
  if (lo + 2 <= top) s.open(lo + 2, top);
  // Below it: blocks of doubling width, until a block's shortest stage is no faster than the best.
  let b = lo - 1;
  for (let width = 1; b >= k; width *= 2) {
    if (s.time(b) >= s.best) break;
    const a = Math.max(k, b - width + 1);
    s.open(a, b);
    b = a - 1;
  }
  return s.best;
}

/** The state of bestEnding's search for one (stage, end): one object per partition, reused, so the inner
 *  loop allocates nothing. Stage times of the current end are remembered by start (the gallop, the bound
 *  and the blocks ask some of them twice). */
class EndingSearch {
  prev: Float64Array = new Float64Array(0);
  best: number;
  private k = 0;
  private j = 0;
  private readonly mins: RangeMin;
  private readonly times: Float64Array;
  private readonly known: Int32Array;
  private round = 0;

  /** `ceiling`: the best to beat before anything is found (Infinity, or the problem's bound). */
  constructor(
    private readonly problem: PartitionProblem,
    private readonly ceiling: number,
  ) {
    this.best = ceiling;
    this.mins = new RangeMin(problem.layers + 1);
    this.times = new Float64Array(problem.layers + 1);
    this.known = new Int32Array(problem.layers + 1);
  }

  /** The previous stage's bests for the next stage's ends. */
  stage(prev: Float64Array): void {
    this.prev = prev;
    this.mins.fill(prev);
  }

  begin(k: number, j: number): void {
    this.k = k;
    this.j = j;
    this.best = this.ceiling;
    this.round++;
  }

  /** Whether any start in [a, b] is reachable (a prev below the ceiling). */
  reachable(a: number, b: number): boolean {
    return this.mins.min(a, b) < this.ceiling;
  }

  time(i: number): number {
    if (this.known[i] === this.round) return this.times[i]!;
    const t = timeOf(this.problem, this.k, i, this.j);
    this.times[i] = t;
    this.known[i] = this.round;
    return t;
  }

  consider(i: number): void {
    const t = this.time(i);
    const v = this.prev[i]! > t ? this.prev[i]! : t;
    if (v < this.best && this.problem.fits(this.k, i, this.j)) this.best = v;
  }

  /** Every start in [a, b], dropping blocks whose bound is no better than the best. */
  open(a: number, b: number): void {
    if (this.mins.min(a, b) >= this.best) return;
    if (this.time(b) >= this.best) return;
    if (a === b) {
      this.consider(a);
      return;
    }
    // The last start (shortest stage) first: the bound is tightest there.
    const mid = (a + b) >> 1;
    this.open(mid + 1, b);
    this.open(a, mid);
  }
}

/** Range minima of a fixed array in O(1) after O(n log n): a sparse table. */
class RangeMin {
  private readonly table: Float64Array[] = [];

  /** Tables for arrays of length n, filled by fill(). */
  constructor(n: number) {
    this.table.push(new Float64Array(n));
    for (let w = 1; 2 * w <= n; w *= 2) this.table.push(new Float64Array(n - 2 * w + 1));
  }

  fill(values: Float64Array): void {
    this.table[0]!.set(values);
    for (let level = 1, w = 1; level < this.table.length; level++, w *= 2) {
      const last = this.table[level - 1]!;
      const next = this.table[level]!;
      for (let i = 0; i < next.length; i++) next[i] = Math.min(last[i]!, last[i + w]!);
    }
  }

  /** min of values[a..b], a <= b. */
  min(a: number, b: number): number {
    const level = 31 - Math.clz32(b - a + 1);
    const row = this.table[level]!;
    return Math.min(row[a]!, row[b - (1 << level) + 1]!);
  }
}

/** Indices 0..n-1, some marked: the largest unmarked index at or below i (-1 when none), marked runs skipped
 *  with path compression. */
class SkipMarked {
  private readonly down: Int32Array;

  constructor(n: number) {
    this.down = new Int32Array(n);
    this.clear();
  }

  /** Every index unmarked. */
  clear(): void {
    for (let i = 0; i < this.down.length; i++) this.down[i] = i;
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
