// The memory plan's two searches over a program's buffers (first-fit offsets, the latest earlier occupant of
// a buffer's bytes) against the quadratic scans they replace, on random buffers built to hit their corner
// cases: equal starts and ends, instants, empty buffers, touching byte ranges.
import { describe, expect, it } from "vitest";
import { firstFitOffsets } from "../../src/compile/first-fit.js";
import { latestEarlierOccupants } from "../../src/compile/occupants.js";

/** A small deterministic generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Case {
  start: Float64Array;
  end: Float64Array;
  size: Float64Array;
}

/** Times on a coarse grid (so starts and ends coincide often), some instants, some empty buffers. */
function buffers(seed: number, n: number): Case {
  const r = random(seed);
  const start = new Float64Array(n);
  const end = new Float64Array(n);
  const size = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    start[i] = Math.floor(r() * 20);
    end[i] = r() < 0.15 ? start[i]! : start[i]! + Math.floor(r() * 12);
    size[i] = r() < 0.1 ? 0 : 256 * (1 + Math.floor(r() * 6));
  }
  return { start, end, size };
}

const overlaps = (s1: number, e1: number, s2: number, e2: number): boolean => (s1 < e2 && s2 < e1) || s1 === s2;

/** The scan memory.ts's layout made before first-fit.ts: every placed buffer, in offset order. */
function naiveOffsets({ start, end, size }: Case, order: readonly number[]): Float64Array {
  const offsets = new Float64Array(start.length);
  const placed: number[] = [];
  for (const i of order) {
    let offset = 0;
    for (const j of placed) {
      if (!overlaps(start[i]!, end[i]!, start[j]!, end[j]!)) continue;
      if (offset + size[i]! <= offsets[j]!) break;
      offset = Math.max(offset, offsets[j]! + size[j]!);
    }
    offsets[i] = offset;
    let at = placed.length;
    while (at > 0 && offsets[placed[at - 1]!]! > offset) at--;
    placed.splice(at, 0, i);
  }
  return offsets;
}

describe("firstFitOffsets", () => {
  it("places every buffer where the scan of all placed buffers did", () => {
    for (let seed = 1; seed <= 60; seed++) {
      const c = buffers(seed, 10 + seed * 3);
      const order = Array.from(c.start, (_, i) => i).sort((a, b) => c.size[b]! - c.size[a]! || c.start[a]! - c.start[b]! || a - b);
      expect(Array.from(firstFitOffsets(c.start, c.end, c.size, order)), `seed ${seed}`).toEqual(Array.from(naiveOffsets(c, order)));
      // Any order, not only the layout's.
      const shuffled = order.slice().reverse();
      expect(Array.from(firstFitOffsets(c.start, c.end, c.size, shuffled)), `seed ${seed}, reversed`).toEqual(Array.from(naiveOffsets(c, shuffled)));
    }
  });

  it("stacks a deep model's nested lifetimes without gaps", () => {
    const n = 2000;
    const start = Float64Array.from({ length: n }, (_, i) => i);
    const end = Float64Array.from({ length: n }, (_, i) => 2 * n - i);
    const size = new Float64Array(n).fill(256);
    const order = Array.from({ length: n }, (_, i) => i);
    expect(Array.from(firstFitOffsets(start, end, size, order))).toEqual(order.map((i) => 256 * i));
  });
});

describe("latestEarlierOccupants", () => {
  it("finds the buffer a scan of every pair finds", () => {
    for (let seed = 1; seed <= 60; seed++) {
      const c = buffers(seed, 10 + seed * 3);
      const order = Array.from(c.start, (_, i) => i).sort((a, b) => c.size[b]! - c.size[a]! || a - b);
      const lo = firstFitOffsets(c.start, c.end, c.size, order);
      const hi = lo.map((x, i) => x + c.size[i]!);
      const r = random(seed + 1000);
      const readerStream = Uint8Array.from(c.start, () => (r() < 0.5 ? 1 : 0));
      const writerStream = Uint8Array.from(c.start, () => (r() < 0.5 ? 1 : 0));
      const naive = Array.from(c.start, (_, i) => {
        let last = -1;
        for (let j = 0; j < c.start.length; j++) {
          if (c.end[j]! > c.start[i]! || j === i || c.start[j] === c.start[i]) continue;
          if (lo[j]! >= hi[i]! || lo[i]! >= hi[j]!) continue;
          if (readerStream[j] === writerStream[i]) continue;
          if (last < 0 || c.end[j]! > c.end[last]!) last = j;
        }
        return last;
      });
      const found = latestEarlierOccupants({ start: c.start, end: c.end, lo, hi, readerStream, writerStream });
      expect(Array.from(found), `seed ${seed}`).toEqual(naive);
    }
  });
});
