// A transfer or collective that is the last use of a buffer (a sent activation, a unit's unsharded gradient
// reduce-scattered) frees it, in the memory plan, at the collective's predicted end. A runtime laying out
// memory without timings cannot know that moment: nothing on the compute stream waits for a send, and a
// reduce-scatter's bytes stay live until the first compute that happens to touch them. This pass tells it:
// the first layer of compute that starts after such a collective's predicted end waits for the collective
// (a dependency, or a gate on that layer), unless the compute stream already waits for it or a later
// collective. The predicted run meets every such wait already (the collective had finished), so no predicted
// time changes; and since each wait points from a later start to an earlier end, none can close a cycle.
import type { ProgramRun } from "./engine.js";
import type { ProgramMemory } from "./memory.js";
import type { Program } from "./program.js";

export function addReleaseDependencies(program: Program, memory: ProgramMemory, run: ProgramRun): void {
  const releasing = new Set<number>();
  for (const b of memory.buffers) if (b.toLayer === undefined && program.actions[b.to]!.stream === "comm") releasing.add(b.to);
  if (releasing.size === 0) return;
  const commPos = new Map(program.comm.map((a, i) => [a, i] as const));
  // The compute stream as segments (one per layer of a compute action) in run order, each with the latest
  // comm position it already waits for, directly or through an earlier segment.
  const segments: { action: number; seg: number; start: number; waited: number }[] = [];
  let waited = -1;
  for (const k of program.compute) {
    const a = program.actions[k]!;
    const n = Math.max(1, a.layers.length);
    for (let s = 0; s < n; s++) {
      if (s === 0) for (const d of a.deps) waited = Math.max(waited, commPos.get(d) ?? -1);
      for (const [layer, x] of a.gates) if (layer === a.layers[s]) waited = Math.max(waited, commPos.get(x) ?? -1);
      segments.push({ action: k, seg: s, start: run.segStart[k]![s]!, waited });
    }
  }
  // Latest comm position first: once a segment waits for it, it and every later segment wait for the earlier
  // collectives it follows on the stream too, so a later-ending one only needs a wait before that segment.
  const order = [...releasing].sort((x, y) => commPos.get(y)! - commPos.get(x)!);
  let earliestAdded = Infinity;
  for (const c of order) {
    const at = firstStartingAfter(segments, run.end[c]!);
    if (at === segments.length || segments[at]!.waited >= commPos.get(c)! || earliestAdded <= at) continue;
    earliestAdded = at;
    const { action, seg } = segments[at]!;
    const a = program.actions[action]!;
    if (seg === 0) a.deps.push(c);
    else a.gates.push([a.layers[seg]!, c]);
  }
}

/** The first segment starting strictly after `t` (segments.length if none): the compute stream runs its
 *  segments one after another, so their starts never decrease. */
function firstStartingAfter(segments: readonly { readonly start: number }[], t: number): number {
  let lo = 0;
  let hi = segments.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (segments[mid]!.start > t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
