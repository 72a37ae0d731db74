// Which arena bytes are taken during a span of time, for greedy-by-size placement (slot-layout.ts): placed
// slots are rectangles (an inclusive range of time positions × a half-open byte range), and a query asks for
// the lowest offset at or above a floor where `size` bytes are clear of every placed slot alive at some time
// in [from, to]. The answer depends only on the union of those slots' byte ranges, so slots are kept merged
// into runs of taken bytes, in a segment tree over time positions: each node holds the runs of the slots
// that cover its whole span (`own`) and of every slot that meets its span at all (`met`). A query's span
// splits into O(log T) nodes whose `met` runs are all alive within it, and the slots that cover a span
// reaching beyond it are found on the two paths from its ends to the root (`own`); every slot alive in the
// span is in one of these lists. Dense columns of small slots (a deep model's saved activations, thousands
// alive at once) merge into a few runs, so a query skips them in a few steps instead of visiting each.

/** Half-open byte runs, sorted, disjoint and not touching, flat: [start0, end0, start1, end1, ...]. */
type Runs = number[];

/** The first run (index of its pair) from run `lo` on whose end is above `x` (or reaches it, `touching`). */
function firstEndingAbove(runs: Runs, x: number, lo: number, touching = false): number {
  let hi = runs.length >> 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const end = runs[2 * mid + 1]!;
    if (end > x || (touching && end === x)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** [start, end) added to `runs`, merged with every run it overlaps or touches (in place: lists are short and
 *  many, so no splice and its removed-elements array). */
function addRun(runs: Runs, start: number, end: number): void {
  // Runs i..j-1 overlap or touch [start, end]: ends from start on, starts up to end.
  const i = firstEndingAbove(runs, start, 0, true);
  let j = i;
  const n = runs.length >> 1;
  while (j < n && runs[2 * j]! <= end) j++;
  if (i === j) {
    runs.push(0, 0);
    for (let k = runs.length - 1; k >= 2 * i + 2; k--) runs[k] = runs[k - 2]!;
    runs[2 * i] = start;
    runs[2 * i + 1] = end;
    return;
  }
  runs[2 * i] = Math.min(start, runs[2 * i]!);
  runs[2 * i + 1] = Math.max(end, runs[2 * j - 1]!);
  const gone = 2 * (j - i - 1);
  if (gone === 0) return;
  for (let k = 2 * i + 2; k + gone < runs.length; k++) runs[k] = runs[k + gone]!;
  runs.length -= gone;
}

export class Occupancy {
  private readonly times: Float64Array;
  /** Leaves in the tree (a power of two); node k's children are 2k and 2k + 1, leaves from `leaves` on. */
  private readonly leaves: number;
  private readonly own: (Runs | undefined)[];
  private readonly met: (Runs | undefined)[];
  // Per query, reused: the non-empty lists it reads and a cursor into each.
  private lists: Runs[] = [];
  private cursors: number[] = [];

  /** `times`: every time position a placed slot or a query may start or end at (any order, repeats allowed). */
  constructor(times: Float64Array) {
    const sorted = times.slice().sort();
    let n = 0;
    for (let k = 0; k < sorted.length; k++) if (k === 0 || sorted[k] !== sorted[n - 1]) sorted[n++] = sorted[k]!;
    this.times = sorted.subarray(0, n);
    let leaves = 1;
    while (leaves < Math.max(1, n)) leaves *= 2;
    this.leaves = leaves;
    this.own = new Array(2 * leaves);
    this.met = new Array(2 * leaves);
  }

  /** Leaf of a time position given to the constructor. */
  private leaf(t: number): number {
    let lo = 0;
    let hi = this.times.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.times[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    if (this.times[lo] !== t) throw new Error(`internal: time ${t} is not one the occupancy index was built for`);
    return this.leaves + lo;
  }

  /** Takes [offset, offset + size) from time `from` to `to` (inclusive). */
  add(from: number, to: number, offset: number, size: number): void {
    const a = this.leaf(from);
    const b = this.leaf(to);
    const end = offset + size;
    const put = (lists: (Runs | undefined)[], k: number): void => {
      const runs = lists[k];
      if (runs === undefined) lists[k] = [offset, end];
      else addRun(runs, offset, end);
    };
    // The nodes that exactly cover [a, b]: `own` and `met`.
    for (let l = a, r = b + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) {
        put(this.own, l);
        put(this.met, l++);
      }
      if (r & 1) {
        put(this.own, --r);
        put(this.met, r);
      }
    }
    // Every node above an end meets the span: `met` (the paths join below the root; the shared part once).
    for (let l = a >> 1, r = b >> 1; l >= 1; l >>= 1, r >>= 1) {
      put(this.met, l);
      if (r !== l) put(this.met, r);
    }
  }

  /** The lowest offset at or above `floor` where [offset, offset + size) is clear from `from` to `to`. */
  lowestClear(from: number, to: number, size: number, floor: number): number {
    const lists = this.lists;
    lists.length = 0;
    const gather = (runs: Runs | undefined): void => {
      if (runs !== undefined && runs.length > 0) lists.push(runs);
    };
    const a = this.leaf(from);
    const b = this.leaf(to);
    for (let l = a, r = b + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) gather(this.met[l++]);
      if (r & 1) gather(this.met[--r]);
    }
    for (let l = a, r = b; l >= 1; l >>= 1, r >>= 1) {
      gather(this.own[l]);
      if (r !== l) gather(this.own[r]);
    }
    const cursors = this.cursors;
    cursors.length = lists.length;
    cursors.fill(0);
    // Each list's first run ending above the offset, if it starts below the offset's end, rules out every
    // offset up to that run's end: move there; done when no list holds a run in the way.
    let offset = floor;
    for (let moved = true; moved; ) {
      moved = false;
      for (let k = 0; k < lists.length; k++) {
        const runs = lists[k]!;
        for (;;) {
          const at = (cursors[k] = firstEndingAbove(runs, offset, cursors[k]!));
          if (2 * at >= runs.length || runs[2 * at]! >= offset + size) break;
          offset = runs[2 * at + 1]!;
          moved = true;
        }
      }
    }
    return offset;
  }
}
