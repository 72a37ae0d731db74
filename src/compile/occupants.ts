// For memory.ts's reuse dependencies: per buffer, the latest earlier occupant of its bytes on one stream, for
// every buffer of a program at once. Comparing each buffer with every other is quadratic (a model of 5,000
// layers has 15,000 buffers per program: 0.7 s); a sweep in time order over a segment tree of the arena's
// address ranges finds the same buffers in O(n log n).

export interface OccupantInput {
  readonly start: Float64Array;
  readonly end: Float64Array;
  /** Address range [lo, hi) of each buffer (aligned). */
  readonly lo: Float64Array;
  readonly hi: Float64Array;
  /** The stream (0 or 1) of each buffer's last reader. */
  readonly readerStream: Uint8Array;
  /** The stream each buffer's writer is on: its occupants are sought among buffers read on the other one. */
  readonly writerStream: Uint8Array;
}

/**
 * Per buffer i, the buffer j (−1 when none) whose last reader is on the other stream than i's writer, whose
 * bytes meet i's, that is released by the time i starts (end[j] ≤ start[i]) and did not start with it
 * (start[j] ≠ start[i]); of those, the latest released, the lowest index among equal ends (what a scan of
 * every j in index order keeping each strictly later end picks).
 */
export function latestEarlierOccupants(x: OccupantInput): Int32Array {
  const { start, end, lo, hi, readerStream, writerStream } = x;
  const n = start.length;
  const out = new Int32Array(n).fill(-1);
  const later = (a: number, b: number): boolean => end[a]! > end[b]! || (end[a] === end[b] && a < b);
  const qualifies = (j: number, i: number): boolean =>
    j !== i && end[j]! <= start[i]! && start[j] !== start[i] && lo[j]! < hi[i]! && lo[i]! < hi[j]! && readerStream[j] !== writerStream[i];

  // Empty buffers (no bytes: meeting one is a strict inequality the address segments below do not model)
  // are few; they are compared with every buffer directly.
  const empty: number[] = [];
  const sized: number[] = [];
  for (let i = 0; i < n; i++) (hi[i]! > lo[i]! ? sized : empty).push(i);
  for (const i of empty) {
    for (let j = 0; j < n; j++) if (qualifies(j, i) && (out[i]! < 0 || later(j, out[i]!))) out[i] = j;
  }

  // Address segments: between consecutive distinct ends of the sized buffers' ranges; two sized ranges meet
  // exactly when they share a segment.
  const bounds = [...new Set(sized.flatMap((i) => [lo[i]!, hi[i]!]))].sort((a, b) => a - b);
  const segment = new Map(bounds.map((b, k) => [b, k] as const));
  const trees = [new LatestTree(Math.max(1, bounds.length - 1), later), new LatestTree(Math.max(1, bounds.length - 1), later)];
  const insert = (j: number): void => trees[readerStream[j]!]!.insert(segment.get(lo[j]!)!, segment.get(hi[j]!)!, j);

  // In order of start: before the buffers starting at s are looked up, every sized buffer released by s is in
  // its reader's tree, except those that also start at s (they go in before the next start).
  const byStart = sized.slice().sort((a, b) => start[a]! - start[b]!);
  const byEnd = sized.slice().sort((a, b) => end[a]! - end[b]!);
  let next = 0;
  let deferred: number[] = [];
  for (let g = 0; g < byStart.length; ) {
    const s = start[byStart[g]!]!;
    for (const j of deferred) insert(j);
    deferred = [];
    for (; next < byEnd.length && end[byEnd[next]!]! <= s; next++) {
      const j = byEnd[next]!;
      if (start[j]! < s) insert(j);
      else deferred.push(j);
    }
    for (; g < byStart.length && start[byStart[g]!] === s; g++) {
      const i = byStart[g]!;
      let best = trees[1 - writerStream[i]!]!.latest(segment.get(lo[i]!)!, segment.get(hi[i]!)!);
      for (const j of empty) if (qualifies(j, i) && (best < 0 || later(j, best))) best = j;
      out[i] = best;
    }
  }
  return out;
}

/** Segments [0, size): insert a buffer over a run of them; ask for the latest buffer over any segment of a
 *  run. Each node keeps the latest buffer covering all of it (`whole`) and the latest touching any of it
 *  (`any`); depth log₂ size. */
class LatestTree {
  private readonly whole: Int32Array;
  private readonly any: Int32Array;

  constructor(
    private readonly size: number,
    private readonly later: (a: number, b: number) => boolean,
  ) {
    this.whole = new Int32Array(4 * size).fill(-1);
    this.any = new Int32Array(4 * size).fill(-1);
  }

  insert(l: number, r: number, j: number): void {
    this.put(1, 0, this.size, l, r, j);
  }

  latest(l: number, r: number): number {
    return this.get(1, 0, this.size, l, r);
  }

  private pick(a: number, b: number): number {
    return a < 0 ? b : b < 0 ? a : this.later(a, b) ? a : b;
  }

  private put(node: number, nl: number, nr: number, l: number, r: number, j: number): void {
    if (r <= nl || nr <= l) return;
    this.any[node] = this.pick(this.any[node]!, j);
    if (l <= nl && nr <= r) {
      this.whole[node] = this.pick(this.whole[node]!, j);
      return;
    }
    const mid = (nl + nr) >> 1;
    this.put(2 * node, nl, mid, l, r, j);
    this.put(2 * node + 1, mid, nr, l, r, j);
  }

  private get(node: number, nl: number, nr: number, l: number, r: number): number {
    if (r <= nl || nr <= l) return -1;
    if (l <= nl && nr <= r) return this.any[node]!;
    const mid = (nl + nr) >> 1;
    return this.pick(this.whole[node]!, this.pick(this.get(2 * node, nl, mid, l, r), this.get(2 * node + 1, mid, nr, l, r)));
  }
}
