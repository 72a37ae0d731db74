// Step 7b of compile: static arena offsets for a program's buffers, from their lifetimes in the predicted run.
// Greedy by decreasing size, each buffer at the lowest offset free for its whole lifetime (first fit), the
// heuristic TFLite and XLA's simple allocators use. Then the dependencies that make reuse safe whatever the
// real timings: a buffer's writer waits for the last reader of whatever it overwrites.
import type { BufferKind } from "../plan/plan.js";
import type { EngineRun } from "./engine.js";
import type { Lifetime } from "./lifetimes.js";
import { firstFitOffsets } from "./first-fit.js";
import { latestEarlierOccupants } from "./occupants.js";
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
  // The lowest offset clear of every buffer placed before it that is alive at the same time (a lifetime
  // ending when another starts does not share that moment: a release comes before an allocation at the
  // same time; two starting together do, even if empty), placed largest first and, where that packs
  // tighter, in order of birth (a split backward's W inputs, filling as the stash drains: largest first
  // left llama-7b's ZB-H1 plan on 2 stages 17% above its peak).
  const bySize = timed.map((_, i) => i).sort((a, b) => size[b]! - size[a]! || start[a]! - start[b]! || a - b);
  const byStart = timed.map((_, i) => i).sort((a, b) => start[a]! - start[b]! || size[b]! - size[a]! || a - b);
  const arenaOf = (offsets: Float64Array): number => {
    let arena = 0;
    for (let i = 0; i < n; i++) arena = Math.max(arena, offsets[i]! + size[i]!);
    return arena;
  };
  const largestFirst = firstFitOffsets(start, end, size, bySize);
  const inOrder = firstFitOffsets(start, end, size, byStart);
  const [sizeArena, orderArena] = [arenaOf(largestFirst), arenaOf(inOrder)];
  const offsets = orderArena < sizeArena ? inOrder : largestFirst;
  const arena = Math.min(sizeArena, orderArena);
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
  const streamOf = (action: number): number => (program.actions[action]!.stream === "compute" ? 1 : 0);
  // Per buffer, the latest earlier occupant of its bytes whose reader is on the other stream than its writer:
  // waiting for it covers the others on that stream (one on the writer's own stream is ordered already).
  const occupants = latestEarlierOccupants({
    start: Float64Array.from(bs, (b) => b.start),
    end: Float64Array.from(bs, (b) => b.end),
    lo: Float64Array.from(bs, (b) => b.offset),
    hi: Float64Array.from(bs, (b) => b.offset + align(b.bytes)),
    readerStream: Uint8Array.from(bs, (b) => streamOf(b.to)),
    writerStream: Uint8Array.from(bs, (b) => streamOf(b.from)),
  });
  bs.forEach((b, i) => {
    const j = occupants[i]!;
    if (j < 0) return;
    const writer = program.actions[b.from]!;
    const a = bs[j]!;
    // Released earlier in the same action's own run: its order already says so.
    if (a.to === b.from) return;
    if (b.fromLayer !== undefined) {
      // Allocated part-way through the writer (at fromLayer): that layer waits, not the whole action, which
      // may itself be what the old occupant's last reader waits for (a reduce-scatter hung on its layers).
      // The occupant's reader is on the other stream (the only one looked at), so a whole action.
      if (!writer.gates.some(([l, x]) => l === b.fromLayer && x === a.to)) writer.gates.push([b.fromLayer, a.to]);
      return;
    }
    if (a.toLayer !== undefined) {
      if (!writer.partial.some(([x, l]) => x === a.to && l === a.toLayer)) writer.partial.push([a.to, a.toLayer]);
    } else if (!writer.deps.includes(a.to) && a.to !== b.from) writer.deps.push(a.to);
  });
}
