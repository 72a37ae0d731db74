// Step 7b of compile: static arena offsets for a program's buffers, from their lifetimes in the predicted run.
// Greedy by decreasing size, each buffer at the lowest offset free for its whole lifetime (first fit), the
// heuristic TFLite and XLA's simple allocators use. Then the dependencies that make reuse safe whatever the
// real timings: a buffer's writer waits for the last reader of whatever it overwrites.
import type { BufferKind } from "../plan/plan.js";
import type { EngineRun } from "./engine.js";
import type { Lifetime } from "./lifetimes.js";
import { segmentOf, type Program } from "./program.js";

/** Offsets are multiples of this (a cache line / CUDA allocation granule; DLPack-friendly). */
export const ALIGNMENT = 256;

export interface PlacedBuffer extends Lifetime {
  readonly offset: number;
  readonly start: number;
  readonly end: number;
}

export interface ProgramMemory {
  readonly arenaBytes: number;
  readonly peakBytes: number;
  readonly buffers: readonly PlacedBuffer[];
  /** Live bytes over time: [seconds, bytes] at every change. */
  readonly timeline: readonly (readonly [number, number])[];
  /** What is live at the peak, by buffer kind (for reports: what to shrink). */
  readonly peakByKind: Readonly<Partial<Record<BufferKind, number>>>;
}

const align = (n: number): number => Math.ceil(n / ALIGNMENT) * ALIGNMENT;

/** Lifetimes [s1, e1] and [s2, e2] share a moment; one ending when the other starts does not (a release
 *  comes before an allocation at the same time), but two starting together do even if empty. */
function overlaps(s1: number, e1: number, s2: number, e2: number): boolean {
  return (s1 < e2 && s2 < e1) || s1 === s2;
}

export function layoutMemory(program: Program, p: number, lifetimes: readonly Lifetime[], run: EngineRun): ProgramMemory {
  const r = run.programs[p]!;
  const timed = lifetimes.map((l) => {
    const start = l.fromLayer === undefined ? r.start[l.from]! : r.segStart[l.from]![segmentOf(program.actions[l.from]!, l.fromLayer)]!;
    const end = l.toLayer === undefined ? r.end[l.to]! : r.segEnd[l.to]![segmentOf(program.actions[l.to]!, l.toLayer)]!;
    if (Number.isNaN(start) || Number.isNaN(end)) throw new Error(`internal: buffer '${l.name}' lives across actions that never ran`);
    return { ...l, start, end: Math.max(start, end) };
  });
  const n = timed.length;
  const start = Float64Array.from(timed, (b) => b.start);
  const end = Float64Array.from(timed, (b) => b.end);
  const size = Float64Array.from(timed, (b) => align(b.bytes));
  const order = timed.map((_, i) => i).sort((a, b) => size[b]! - size[a]! || start[a]! - start[b]! || a - b);
  const offsets = new Float64Array(n);
  // Placed buffers sorted by offset: the first gap wide enough among those alive at the same time wins.
  const placed: number[] = [];
  let arena = 0;
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
    arena = Math.max(arena, offset + size[i]!);
  }
  const buffers: PlacedBuffer[] = timed.map((b, i) => ({ ...b, offset: offsets[i]! }));
  const { peak, peakTime, timeline } = liveBytes(buffers);
  const peakByKind: Partial<Record<BufferKind, number>> = {};
  for (const b of buffers) {
    if ((b.start <= peakTime && peakTime < b.end) || b.start === peakTime) peakByKind[b.kind] = (peakByKind[b.kind] ?? 0) + b.bytes;
  }
  return { arenaBytes: arena, peakBytes: peak, buffers, timeline, peakByKind };
}

function liveBytes(buffers: readonly PlacedBuffer[]): { peak: number; peakTime: number; timeline: [number, number][] } {
  // Releases before allocations at equal times, as the layout assumes.
  const events = buffers.flatMap((b) => [
    [b.start, b.bytes, 1],
    [b.end, -b.bytes, 0],
  ] as const);
  events.sort((a, b) => a[0] - b[0] || a[2] - b[2]);
  let live = 0;
  let peak = 0;
  let peakTime = 0;
  const timeline: [number, number][] = [];
  for (const [t, d] of events) {
    live += d;
    if (live > peak) {
      peak = live;
      peakTime = t;
    }
    const last = timeline[timeline.length - 1];
    if (last && last[0] === t) last[1] = live;
    else timeline.push([t, live]);
  }
  return { peak, peakTime, timeline };
}

/**
 * Adds the dependencies that make the layout safe at run time: when a buffer takes over bytes another
 * buffer used earlier, the action that allocates it waits for the last reader of the old one, unless the
 * stream order already guarantees that. The predicted run meets every such dependency already, so adding
 * them changes no predicted time.
 */
export function addReuseDependencies(program: Program, memory: ProgramMemory): void {
  const bs = memory.buffers;
  const n = bs.length;
  const start = Float64Array.from(bs, (b) => b.start);
  const end = Float64Array.from(bs, (b) => b.end);
  const lo = Float64Array.from(bs, (b) => b.offset);
  const hi = Float64Array.from(bs, (b) => b.offset + align(b.bytes));
  const readerOnCompute = Uint8Array.from(bs, (b) => (program.actions[b.to]!.stream === "compute" ? 1 : 0));
  for (let i = 0; i < n; i++) {
    const b = bs[i]!;
    const writerOnCompute = program.actions[b.from]!.stream === "compute" ? 1 : 0;
    // Per stream, the latest earlier occupant of b's bytes: waiting for it covers the others on that stream.
    const last = [-1, -1];
    for (let j = 0; j < n; j++) {
      if (end[j]! > start[i]! || j === i || start[j] === start[i]) continue;
      if (lo[j]! >= hi[i]! || lo[i]! >= hi[j]!) continue;
      const stream = readerOnCompute[j]!;
      if (stream === writerOnCompute) continue;
      if (last[stream]! < 0 || end[j]! > end[last[stream]!]!) last[stream] = j;
    }
    const writer = program.actions[b.from]!;
    for (const j of last) {
      if (j < 0) continue;
      const a = bs[j]!;
      // Released earlier in the same action's own run: its order already says so.
      if (a.to === b.from) continue;
      if (b.fromLayer !== undefined) {
        // Allocated part-way through the writer (at fromLayer): that layer waits, not the whole action, which
        // may itself be what the old occupant's last reader waits for (a reduce-scatter hung on its layers).
        // The occupant's reader is on the other stream (same-stream ones were skipped above), so a whole action.
        if (!writer.gates.some(([l, x]) => l === b.fromLayer && x === a.to)) writer.gates.push([b.fromLayer, a.to]);
        continue;
      }
      if (a.toLayer !== undefined) {
        if (!writer.partial.some(([x, l]) => x === a.to && l === a.toLayer)) writer.partial.push([a.to, a.toLayer]);
      } else if (!writer.deps.includes(a.to) && a.to !== b.from) writer.deps.push(a.to);
    }
  }
}
