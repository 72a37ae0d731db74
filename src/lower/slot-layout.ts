// Offsets for a step program's slots in one arena, reusing memory between values whose lifetimes do not
// overlap: a value lives from the instruction that writes it to the last one that reads it (an instruction's
// outputs never share memory with its inputs, as the intervals meet at that instruction); slots read or
// written from outside a run (parameters, state, inputs, losses) live throughout. Two deterministic
// heuristics, the smaller arena kept: a sweep in time order with best fit over a coalescing free list, and
// greedy by size (largest first, each at the lowest offset clear of every placed slot it is alive with, as
// TensorFlow Lite's arena planner does), which packs large, long-lived values (FSDP's gathered units and
// gradients) much tighter.

import { Occupancy } from "./occupancy.js";

export interface SlotNeed {
  readonly bytes: number;
  /** First and last instruction index using it (from <= to); pinned slots use [-1, Infinity]. */
  readonly from: number;
  readonly to: number;
}

const ALIGN = 64;
const aligned = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

export interface SlotLayout {
  readonly offsets: number[];
  readonly arenaBytes: number;
}

/** Offsets by slot, and the arena's size: the better of the two heuristics. */
export function layoutSlots(needs: readonly SlotNeed[]): SlotLayout {
  const sweep = sweepBestFit(needs);
  const greedy = greedyBySize(needs);
  return greedy.arenaBytes < sweep.arenaBytes ? greedy : sweep;
}

/** Largest first; each at the lowest offset where it clears every already placed slot alive with it. The
 *  placed slots alive with one are asked of an index over time that keeps their bytes merged into runs
 *  (occupancy.ts), so a slot above thousands of live ones skips them a run at a time; the answer is the same
 *  as scanning those slots one by one in offset order (it depends only on the union of their bytes).
 *  gpt-tiny at 500 layers (15k slots to place, 2,100 alive with each on average): 2.9 s by sorting each
 *  one's conflicts, 0.1 s this way. */
export function greedyBySize(needs: readonly SlotNeed[]): SlotLayout {
  const n = needs.length;
  const size = Float64Array.from(needs, (x) => aligned(x.bytes));
  const from = Float64Array.from(needs, (x) => x.from);
  const to = Float64Array.from(needs, (x) => x.to);
  const order = needs.map((_, i) => i).sort((a, b) => size[b]! - size[a]! || from[a]! - from[b]! || a - b);
  const offsets = new Float64Array(n);
  // Slots alive throughout (parameters, optimizer state, gradient accumulators) clash with every other: they
  // take the bottom of the arena, packed in the same order, and the rest is placed above them without
  // looking at them again. Any layout leaves their bytes unusable at every moment, so packing them costs
  // nothing; a deep model's thousands of them made each placement scan them all (gpt-tiny with 500 layers:
  // 24k pinned of 39k slots, 58 s to lay out).
  let base = 0;
  const throughout = (i: number) => to[i] === Infinity && from[i]! < 0;
  for (const id of order) {
    if (!throughout(id)) continue;
    offsets[id] = base;
    base += size[id]!;
  }
  // Empty slots (views, whose bytes belong to their root) take no room and hold none.
  const placed = order.filter((id) => size[id]! > 0 && !throughout(id));
  const times = new Float64Array(2 * placed.length);
  placed.forEach((id, k) => {
    times[2 * k] = from[id]!;
    times[2 * k + 1] = to[id]!;
  });
  const taken = new Occupancy(times);
  let arenaBytes = 0;
  for (const id of placed) {
    const offset = taken.lowestClear(from[id]!, to[id]!, size[id]!, base);
    offsets[id] = offset;
    taken.add(from[id]!, to[id]!, offset, size[id]!);
    arenaBytes = Math.max(arenaBytes, offset + size[id]!);
  }
  return { offsets: Array.from(offsets), arenaBytes: Math.max(arenaBytes, base) };
}

/** In time order, best fit over a free list kept sorted by offset and coalesced. */
export function sweepBestFit(needs: readonly SlotNeed[]): SlotLayout {
  const order = needs.map((_, i) => i).sort((a, b) => needs[a]!.from - needs[b]!.from || a - b);
  const offsets = new Array<number>(needs.length).fill(0);
  const free: { offset: number; size: number }[] = [];
  let top = 0;
  let arenaBytes = 0;
  // Slots that die, by when: the sweep releases those dead before each slot's start. Every slot dies no earlier
  // than it starts (to >= from), so one dead before a start was met earlier in the sweep. Each batch is
  // released newest first, as a list of the live slots scanned from its end would (gpt2-124m's and
  // llama-7b's tens of thousands of slots, thousands live at once, made that scan most of the layout).
  const rank = new Array<number>(needs.length);
  order.forEach((id, k) => (rank[id] = k));
  const mortal = order.filter((id) => needs[id]!.to !== Infinity).sort((a, b) => needs[a]!.to - needs[b]!.to || a - b);
  let dead = 0;
  const batch: number[] = [];
  const release = (id: number): void => {
    const block = { offset: offsets[id]!, size: aligned(needs[id]!.bytes) };
    let at = free.findIndex((f) => f.offset > block.offset);
    if (at < 0) at = free.length;
    free.splice(at, 0, block);
    // Coalesce with the neighbours.
    if (at + 1 < free.length && free[at]!.offset + free[at]!.size === free[at + 1]!.offset) {
      free[at]!.size += free[at + 1]!.size;
      free.splice(at + 1, 1);
    }
    if (at > 0 && free[at - 1]!.offset + free[at - 1]!.size === free[at]!.offset) {
      free[at - 1]!.size += free[at]!.size;
      free.splice(at, 1);
    }
    // A free block at the top rejoins it, so a value too large for every block grows the arena only by what
    // the block lacks (gpt2-124m in bf16: 5% above the live peak instead of 11%).
    const last = free[free.length - 1];
    if (last && last.offset + last.size === top) {
      top = last.offset;
      free.pop();
    }
  };
  for (const id of order) {
    const need = needs[id]!;
    if (!(need.from <= need.to)) throw new Error(`internal: slot ${id} ends (${need.to}) before it starts (${need.from})`);
    batch.length = 0;
    while (dead < mortal.length && needs[mortal[dead]!]!.to < need.from) batch.push(mortal[dead++]!);
    batch.sort((a, b) => rank[b]! - rank[a]!);
    for (const d of batch) release(d);
    const size = aligned(need.bytes);
    // Best fit: the smallest free block that holds it, so large blocks stay whole for large values.
    let fit = -1;
    for (let i = 0; i < free.length; i++) if (free[i]!.size >= size && (fit < 0 || free[i]!.size < free[fit]!.size)) fit = i;
    if (fit >= 0) {
      offsets[id] = free[fit]!.offset;
      free[fit]!.offset += size;
      free[fit]!.size -= size;
      if (free[fit]!.size === 0) free.splice(fit, 1);
    } else {
      offsets[id] = top;
      top += size;
      arenaBytes = Math.max(arenaBytes, top);
    }
  }
  return { offsets, arenaBytes };
}
