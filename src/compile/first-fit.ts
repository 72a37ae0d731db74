// For memory.ts's layout: each buffer, in the order given, at the lowest offset where it meets no buffer
// placed before it that is alive at the same time (first fit). Looking through every placed buffer for each
// one is quadratic, and a deep model's stash is exactly the bad case: every layer's activations live across
// the whole step, so each buffer placed later passes all of them (gpt-tiny with 5,000 layers: 15,000 buffers,
// 0.6 s). Here the placed buffers are filed in a segment tree over time, each node holding the byte ranges
// of the buffers filed there merged into runs, so a lookup meets a few runs instead of thousands of buffers.
//
// Two lifetimes [s1, e1] and [s2, e2] share a moment when s1 < e2 && s2 < e1, or s1 = s2 (memory.ts's
// overlaps). Cut time at every start and end (and once more after the last): a lifetime of positive length
// covers the pieces from its start up to its end, an instant the one piece starting at it, and two lifetimes
// share a moment exactly when they share a piece.
//
// The offset found is the lowest p ≥ 0 such that no conflicting buffer [lo, hi) has lo < p + size and p < hi
// (a buffer of no bytes blocks p when it lies strictly inside [p, p + size)). That depends only on the union
// of what conflicts, which is why runs may be merged; an empty buffer itself always goes at 0.

/** Offsets for buffers placed in `order` (indices into the arrays); `end[i] >= start[i]`. */
export function firstFitOffsets(start: Float64Array, end: Float64Array, size: Float64Array, order: readonly number[]): Float64Array {
  const n = start.length;
  const times = [...new Set([...start, ...end])].sort((a, b) => a - b);
  const piece = new Map(times.map((t, k) => [t, k] as const));
  // Pieces [times[k], times[k + 1]), the last one open-ended.
  const tree = new RunTree(times.length);
  const offsets = new Float64Array(n);
  for (const i of order) {
    const a = piece.get(start[i]!)!;
    const b = start[i] === end[i] ? a + 1 : piece.get(end[i]!)!;
    const sz = size[i]!;
    if (sz === 0) continue;
    const p = tree.lowestFree(a, b, sz);
    offsets[i] = p;
    tree.add(a, b, p, p + sz);
  }
  return offsets;
}

/**
 * A segment tree over time pieces [0, m). A buffer alive over pieces [a, b) is filed at the nodes that
 * cover [a, b) exactly (`own`); every node also keeps the byte ranges of all buffers filed at or below it
 * (`below`). The buffers meeting [a, b) are those filed below one of its covering nodes and those filed at a
 * node above one.
 */
class RunTree {
  private readonly own: Runs[] = [];
  private readonly below: Runs[] = [];

  constructor(private readonly m: number) {}

  add(a: number, b: number, lo: number, hi: number): void {
    this.visit(1, 0, this.m, a, b, (node, whole) => {
      this.runs(this.below, node).add(lo, hi);
      if (whole) this.runs(this.own, node).add(lo, hi);
    });
  }

  /** The lowest offset where `size` bytes meet nothing alive over pieces [a, b). */
  lowestFree(a: number, b: number, size: number): number {
    const sets: Runs[] = [];
    this.visit(1, 0, this.m, a, b, (node, whole) => {
      const r = whole ? this.below[node] : this.own[node];
      if (r) sets.push(r);
    });
    // Raise p past whatever blocks it until nothing does: every offset skipped is blocked.
    let p = 0;
    for (let moved = true; moved; ) {
      moved = false;
      for (const r of sets) {
        const hi = r.blockingEnd(p, size);
        if (hi !== undefined) {
          p = hi;
          moved = true;
        }
      }
    }
    return p;
  }

  private runs(list: Runs[], node: number): Runs {
    return (list[node] ??= new Runs());
  }

  /** The nodes on the way to [a, b)'s cover, each told whether it is part of the cover; depth log₂ m. */
  private visit(node: number, nl: number, nr: number, a: number, b: number, at: (node: number, whole: boolean) => void): void {
    if (b <= nl || nr <= a) return;
    const whole = a <= nl && nr <= b;
    at(node, whole);
    if (whole) return;
    const mid = (nl + nr) >> 1;
    this.visit(2 * node, nl, mid, a, b, at);
    this.visit(2 * node + 1, mid, nr, a, b, at);
  }
}

/** Byte ranges merged into disjoint runs [lo, hi), sorted (ranges that meet or touch are one run). */
class Runs {
  private readonly lo: number[] = [];
  private readonly hi: number[] = [];

  add(lo: number, hi: number): void {
    // The runs from the first ending at or after lo to the last starting at or before hi merge with it.
    const first = this.firstEndingAtOrAfter(lo);
    let last = first;
    while (last < this.lo.length && this.lo[last]! <= hi) last++;
    if (first < last) {
      lo = Math.min(lo, this.lo[first]!);
      hi = Math.max(hi, this.hi[last - 1]!);
    }
    this.lo.splice(first, last - first, lo);
    this.hi.splice(first, last - first, hi);
  }

  /** The end of the run that blocks offset p for `size` bytes (lo < p + size and p < hi), if one does. */
  blockingEnd(p: number, size: number): number | undefined {
    const k = this.firstEndingAfter(p);
    return k < this.lo.length && this.lo[k]! < p + size ? this.hi[k] : undefined;
  }

  private firstEndingAtOrAfter(x: number): number {
    let a = 0;
    let b = this.hi.length;
    while (a < b) {
      const mid = (a + b) >> 1;
      if (this.hi[mid]! < x) a = mid + 1;
      else b = mid;
    }
    return a;
  }

  private firstEndingAfter(x: number): number {
    let a = 0;
    let b = this.hi.length;
    while (a < b) {
      const mid = (a + b) >> 1;
      if (this.hi[mid]! <= x) a = mid + 1;
      else b = mid;
    }
    return a;
  }
}
