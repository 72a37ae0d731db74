// Min-max partition of parameter sizes over the ranks of a shard group (who owns which parameter's optimizer
// state under OSS/ShardedDDP), and FairScale OSS's greedy for comparison.
//
// The problem is P||Cmax: assign items (parameters, by element count) to k ranks, any item to any rank, so
// that the largest rank total is as small as possible. Arbitrary (not contiguous) assignment because its
// optimum is never worse than FairScale's greedy, itself an arbitrary assignment, while an optimal
// contiguous split can be (sizes 2,2,1,1 on 2 ranks: contiguous best 4, greedy 3). The problem is NP-hard:
// heuristic starts (the greedy, LPT, Karmarkar–Karp differencing, each improved by local search) give a
// good answer fast, then an exact branch and bound tries to beat it. The search is complete (optimal) when
// it finishes, which it does on small instances (tests compare it with brute force); on large ones it
// may run out of its node budget and the result says optimality is unproven, with a lower bound beside it.

export interface Partition {
  /** Per item: the owning rank. */
  readonly owners: readonly number[];
  /** Per rank: the sum of its items' sizes. */
  readonly loads: readonly number[];
  readonly largest: number;
}

export interface OptimalPartition extends Partition {
  /** A bound no assignment beats: max(⌈Σ/k⌉, the largest item, and for each j the j + 1 smallest of the
   *  j·k + 1 largest items, which pigeonhole puts on one rank). */
  readonly lowerBound: number;
  /** True when `largest` is proven minimal (it meets the lower bound or the search finished). */
  readonly optimal: boolean;
  /** Branch-and-bound nodes visited (deterministic, for reports and budgets). */
  readonly nodes: number;
}

export interface PartitionOptions {
  /** Nodes the branch and bound may visit before it settles for the best found (default 100,000). */
  readonly nodeBudget?: number;
}

const DEFAULT_NODE_BUDGET = 100_000;

function checkInput(sizes: readonly number[], ranks: number): void {
  if (!Number.isInteger(ranks) || ranks < 1) throw new Error(`internal: a partition needs a positive rank count, got ${ranks}`);
  for (const s of sizes) {
    if (!Number.isSafeInteger(s) || s < 0) throw new Error(`internal: partition sizes must be non-negative integers, got ${s}`);
  }
}

function finish(sizes: readonly number[], owners: readonly number[], ranks: number): Partition {
  const loads = new Array<number>(ranks).fill(0);
  owners.forEach((r, i) => (loads[r]! += sizes[i]!));
  return { owners: [...owners], loads, largest: Math.max(...loads) };
}

/** The smallest-loaded rank, lowest index on ties. */
function leastLoaded(loads: readonly number[]): number {
  let best = 0;
  for (let r = 1; r < loads.length; r++) if (loads[r]! < loads[best]!) best = r;
  return best;
}

/**
 * FairScale OSS's partition_parameters: parameters in declaration order, each to the rank whose total is
 * currently smallest (lowest rank on ties).
 */
export function greedyPartition(sizes: readonly number[], ranks: number): Partition {
  checkInput(sizes, ranks);
  const loads = new Array<number>(ranks).fill(0);
  const owners = sizes.map((s) => {
    const r = leastLoaded(loads);
    loads[r]! += s;
    return r;
  });
  return finish(sizes, owners, ranks);
}

/** Items by size, largest first, index order on ties (the order LPT and the search use). */
function bySizeDesc(sizes: readonly number[]): number[] {
  return sizes.map((_, i) => i).sort((a, b) => sizes[b]! - sizes[a]! || a - b);
}

/** Longest processing time first: largest item to the least-loaded rank (within 4/3 of optimal). */
export function lptPartition(sizes: readonly number[], ranks: number): Partition {
  checkInput(sizes, ranks);
  const loads = new Array<number>(ranks).fill(0);
  const owners = new Array<number>(sizes.length).fill(0);
  for (const i of bySizeDesc(sizes)) {
    const r = leastLoaded(loads);
    owners[i] = r;
    loads[r]! += sizes[i]!;
  }
  return finish(sizes, owners, ranks);
}

export function partitionLowerBound(sizes: readonly number[], ranks: number): number {
  checkInput(sizes, ranks);
  const total = sizes.reduce((a, b) => a + b, 0);
  const sorted = [...sizes].sort((a, b) => b - a);
  let bound = Math.max(Math.ceil(total / ranks), sorted[0] ?? 0);
  // Pigeonhole: of the j·k + 1 largest items some rank gets j + 1, at least the j + 1 smallest of them.
  for (let j = 1; j * ranks < sorted.length; j++) {
    let sum = 0;
    for (let i = j * ranks - j; i <= j * ranks; i++) sum += sorted[i]!;
    bound = Math.max(bound, sum);
  }
  return bound;
}

/**
 * Karmarkar–Karp's largest differencing method, k-way (Michiels et al. 2007): every item starts as a partial
 * partition with one non-empty subset; the two partial partitions with the largest spread (max − min sum)
 * are merged, largest subset of one with the smallest of the other, until one remains. Much better than LPT
 * when there are many items (it balances the small ones against the spread the large ones leave).
 */
export function differencingPartition(sizes: readonly number[], ranks: number): Partition {
  checkInput(sizes, ranks);
  interface Part {
    readonly id: number;
    /** k subsets, sums descending. */
    readonly subsets: { sum: number; items: number[] }[];
  }
  const spread = (p: Part): number => p.subsets[0]!.sum - p.subsets[ranks - 1]!.sum;
  const before = (a: Part, b: Part): boolean => spread(a) > spread(b) || (spread(a) === spread(b) && a.id < b.id);
  const heap: Part[] = [];
  const push = (p: Part): void => {
    let i = heap.push(p) - 1;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!before(p, heap[up]!)) break;
      heap[i] = heap[up]!;
      i = up;
    }
    heap[i] = p;
  };
  const pop = (): Part => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= heap.length) break;
        const c = l + 1 < heap.length && before(heap[l + 1]!, heap[l]!) ? l + 1 : l;
        if (!before(heap[c]!, last)) break;
        heap[i] = heap[c]!;
        i = c;
      }
      heap[i] = last;
    }
    return top;
  };
  let id = 0;
  sizes.forEach((s, i) => {
    const subsets = Array.from({ length: ranks }, (_, r) => (r === 0 ? { sum: s, items: [i] } : { sum: 0, items: [] as number[] }));
    push({ id: id++, subsets });
  });
  while (heap.length > 1) {
    const a = pop();
    const b = pop();
    const subsets = a.subsets.map((x, r) => {
      const y = b.subsets[ranks - 1 - r]!;
      const [big, small] = x.items.length >= y.items.length ? [x.items, y.items] : [y.items, x.items];
      for (const it of small) big.push(it);
      return { sum: x.sum + y.sum, items: big };
    });
    subsets.sort((x, y) => y.sum - x.sum);
    push({ id: id++, subsets });
  }
  const owners = new Array<number>(sizes.length).fill(0);
  heap[0]?.subsets.forEach((sub, r) => sub.items.forEach((i) => (owners[i] = r)));
  return finish(sizes, owners, ranks);
}

/**
 * Local search from a start: while the fullest rank can shed load by moving one of its items to another
 * rank, or swapping one for a smaller item of another rank, so that neither ends at or above the fullest
 * rank's old total, do the best such step. Each step lowers Σ load², so it terminates.
 */
function improve(sizes: readonly number[], start: Partition): number[] {
  const owners = [...start.owners];
  const ranks = start.loads.length;
  const loads = [...start.loads];
  const limit = 10 * sizes.length + 100;
  for (let step = 0; step < limit; step++) {
    let a = 0;
    for (let r = 1; r < ranks; r++) if (loads[r]! > loads[a]!) a = r;
    // Items of equal size are interchangeable: one representative per (rank, size) keeps a step cheap when
    // a model repeats its layers.
    const bySize = Array.from({ length: ranks }, () => new Map<number, number>());
    owners.forEach((r, i) => {
      const m = bySize[r]!;
      if (!m.has(sizes[i]!)) m.set(sizes[i]!, i);
    });
    // The best step minimizes the larger of the two new totals.
    let best = loads[a]!;
    let move: { item: number; to: number } | undefined;
    let swap: { item: number; other: number } | undefined;
    for (const [x, i] of bySize[a]!) {
      if (x === 0) continue;
      for (let b = 0; b < ranks; b++) {
        if (b === a) continue;
        const worse = Math.max(loads[a]! - x, loads[b]! + x);
        if (worse < best) [best, move, swap] = [worse, { item: i, to: b }, undefined];
        for (const [y, j] of bySize[b]!) {
          const d = x - y;
          if (d <= 0) continue;
          const worse = Math.max(loads[a]! - d, loads[b]! + d);
          if (worse < best) [best, move, swap] = [worse, undefined, { item: i, other: j }];
        }
      }
    }
    if (move) {
      loads[a]! -= sizes[move.item]!;
      loads[move.to]! += sizes[move.item]!;
      owners[move.item] = move.to;
    } else if (swap) {
      const b = owners[swap.other]!;
      const d = sizes[swap.item]! - sizes[swap.other]!;
      loads[a]! -= d;
      loads[b]! += d;
      owners[swap.item] = b;
      owners[swap.other] = a;
    } else break;
  }
  return owners;
}

/**
 * The min-max partition. Improves FairScale's greedy, LPT and differencing by local search and keeps the
 * best (so it is never worse than the greedy), then runs a depth-first branch and bound over items largest
 * first (Korf's complete greedy algorithm): each item tries the ranks in increasing load, once per distinct
 * load (ranks with equal loads are interchangeable), and a branch is cut as soon as a rank would reach the
 * best total found. The search stops at the lower bound, when it has tried every assignment (the result is
 * then optimal), or after `nodeBudget` nodes (then `optimal` is false unless the bound was met).
 */
export function minMaxPartition(sizes: readonly number[], ranks: number, options: PartitionOptions = {}): OptimalPartition {
  checkInput(sizes, ranks);
  const budget = options.nodeBudget ?? DEFAULT_NODE_BUDGET;
  if (!Number.isInteger(budget) || budget < 1) throw new Error(`internal: the partition node budget must be a positive integer, got ${budget}`);
  const lowerBound = partitionLowerBound(sizes, ranks);
  // The best of three starts, each improved: the greedy (so the result never loses to it), LPT, differencing.
  let bestOwners: number[] = [];
  let best = Infinity;
  for (const start of [greedyPartition(sizes, ranks), lptPartition(sizes, ranks), differencingPartition(sizes, ranks)]) {
    const owners = improve(sizes, start);
    const largest = finish(sizes, owners, ranks).largest;
    if (largest < best) [best, bestOwners] = [largest, owners];
  }
  if (best <= lowerBound || sizes.length === 0) {
    return { ...finish(sizes, bestOwners, ranks), lowerBound, optimal: true, nodes: 0 };
  }

  const order = bySizeDesc(sizes);
  const n = order.length;
  const loads = new Float64Array(ranks);
  const owners = new Array<number>(n).fill(0);
  // Ranks sorted by (load, rank), kept sorted as loads change: the order is a function of the loads alone,
  // so undoing an assignment restores it exactly and a node can resume its candidates by position.
  const sorted = Int32Array.from({ length: ranks }, (_, r) => r);
  const less = (x: number, y: number): boolean => loads[x]! < loads[y]! || (loads[x] === loads[y] && x < y);
  const reorder = (r: number): void => {
    let i = sorted.indexOf(r);
    while (i + 1 < ranks && less(sorted[i + 1]!, r)) (sorted[i] = sorted[i + 1]!), i++;
    while (i > 0 && less(r, sorted[i - 1]!)) (sorted[i] = sorted[i - 1]!), i--;
    sorted[i] = r;
  };
  // Per depth: the next position of `sorted` to try, the load last tried (equal loads are interchangeable,
  // so each distinct load is tried once), and the rank the item sits on now (-1: none).
  const nextPos = new Int32Array(n);
  const lastLoad = new Float64Array(n).fill(-1);
  const placed = new Int32Array(n).fill(-1);
  let nodes = 1;
  let exhausted = false;
  let depth = 0;
  while (depth >= 0) {
    const item = order[depth]!;
    const x = sizes[item]!;
    if (placed[depth]! >= 0) {
      const r = placed[depth]!;
      loads[r]! -= x;
      reorder(r);
      placed[depth] = -1;
    }
    let k = nextPos[depth]!;
    while (k < ranks && loads[sorted[k]!] === lastLoad[depth]) k++;
    // Candidates ascend by load: once one reaches the best total, so do all the rest.
    if (k >= ranks || loads[sorted[k]!]! + x >= best) {
      depth--;
      continue;
    }
    const r = sorted[k]!;
    nextPos[depth] = k + 1;
    lastLoad[depth] = loads[r]!;
    loads[r]! += x;
    reorder(r);
    placed[depth] = r;
    owners[item] = r;
    if (depth === n - 1) {
      // Every load is below `best` (each placement was), so this is a strictly better assignment.
      best = Math.max(...loads);
      bestOwners = [...owners];
      if (best <= lowerBound) break;
      continue;
    }
    if (nodes >= budget) {
      exhausted = true;
      break;
    }
    nodes++;
    depth++;
    nextPos[depth] = 0;
    lastLoad[depth] = -1;
    placed[depth] = -1;
  }
  const result = finish(sizes, bestOwners, ranks);
  return { ...result, lowerBound, optimal: !exhausted || result.largest <= lowerBound, nodes };
}
