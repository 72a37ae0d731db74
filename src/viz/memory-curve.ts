// Memory per device over the predicted step: each program's buffers live from their `from` action's start
// (or its `fromLayer`'s) to their `to` action's end (or its `toLayer`'s), as the memory plan lays them out; the
// curve is the live bytes at every change.
import type { Plan, PlanProgram } from "../plan/plan.js";
import { parseAction } from "../schedule/action.js";
import { ranksLabel } from "./format.js";
import type { LayerFacts } from "./layers.js";
import { tensorDevices } from "./tensor-map.js";
import type { MemoryCurve } from "./view-types.js";

/**
 * When a compute action starts or finishes one of its layers: for a buffer allocated (`fromLayer`: an FSDP
 * unit's gradient) or released (`toLayer`: a unit freed after its last layer) part-way through it. The plan
 * keeps only whole actions' times, so the point is placed by the layers' share of the action's roofline time
 * (uniform when the roofline has none): close, and exact at the action's first and last layer.
 */
function layerTime(program: PlanProgram, id: number, target: number | undefined, edge: "start" | "end", plan: Plan, facts: readonly LayerFacts[]): number {
  const a = program.actions[id]!;
  if (target === undefined) return edge === "start" ? a.start : a.end;
  const parsed = parseAction(a.text);
  if (!parsed.ok) return edge === "start" ? a.start : a.end;
  const { kind, stage } = parsed.action;
  const [lo, hi] = plan.stages[stage]!.layers;
  const forward = kind === "F" || kind === "R";
  // The stage's layers in the order the action runs them: first to last forward, last to first backward.
  const n = hi - lo + 1;
  const layer = (i: number) => (forward ? lo + i : hi - i);
  const weight = (l: number) => (forward ? facts[l]!.forwardSeconds : facts[l]!.backwardSeconds);
  let total = 0;
  for (let i = 0; i < n; i++) total += weight(layer(i));
  const uniform = !(total > 0);
  if (uniform) total = n;
  let done = 0;
  for (let i = 0; i < n; i++) {
    if (edge === "start" && layer(i) === target) break;
    done += uniform ? 1 : weight(layer(i));
    if (layer(i) === target) break;
  }
  return a.start + ((a.end - a.start) * done) / total;
}

export function memoryCurves(plan: Plan, facts: readonly LayerFacts[]): MemoryCurve[] {
  return plan.memory.map((m) => {
    const program = plan.programs[m.program]!;
    // Releases before allocations at equal times, as the memory plan's layout assumes.
    const events: [number, number, number][] = [];
    for (const b of m.buffers) {
      const start = layerTime(program, b.from, b.fromLayer, "start", plan, facts);
      events.push([start, b.bytes, 1], [Math.max(start, layerTime(program, b.to, b.toLayer, "end", plan, facts)), -b.bytes, 0]);
    }
    events.sort((x, y) => x[0] - y[0] || x[2] - y[2]);
    const points: [number, number][] = [[0, 0]];
    let live = 0;
    let max = 0;
    for (const [t, d] of events) {
      live += d;
      max = Math.max(max, live);
      const last = points[points.length - 1]!;
      if (last[0] === t) last[1] = live;
      else points.push([t, live]);
    }
    return {
      program: m.program,
      label: ranksLabel(tensorDevices(program.ranks, plan.settings.tensorParallel)),
      stages: program.stages,
      points,
      maxBytes: max,
      planPeakBytes: m.peakBytes,
      arenaBytes: m.arenaBytes,
      capacityBytes: plan.cluster.memoryBytes,
    };
  });
}
