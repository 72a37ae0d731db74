// The order a device lowers its program in: one sequence of pieces — communication actions whole, compute
// actions cut into runs of one layer — that keeps every dependency of the plan, including those inside an
// action: a collective hung on a layer of a compute action (`partial`: a gradient bucket reduced once its
// last layer is done, the next FSDP unit prefetched during the current one) and a layer gated on a
// collective (`gates`: a unit's weights needed before that layer). At whole-action granularity these can form
// cycles (F waits for a gather that waits for part of F); at layer granularity they do not. Among ready
// pieces the one the plan predicts to start first goes first.
import type { OpNode } from "../graph/graph.js";
import type { PlanAction, PlanProgram } from "../plan/plan.js";
import { actionFromText } from "../schedule/action.js";
import type { GradRoutes } from "./grad-routes.js";

/** A piece of a program: a whole non-compute action, or one layer's run of a compute action's ops. */
export interface ActionPiece {
  readonly action: PlanAction;
  /** Compute actions: the layer of the run and its ops (recomputed forward ops included). */
  readonly layer?: number;
  readonly ops?: readonly OpNode[];
}

/**
 * Each compute action's ops: F and R the stage's forward, I/W the input/weight gradients, B both in graph
 * order; before a B or I first reaches a layer that is checkpointed on its own (@checkpoint, selective
 * recompute) its forward runs again, unless an R already rebuilt the whole stage for that micro-batch.
 * Cut into runs of consecutive ops of one layer.
 */
function computePieces(p: PlanProgram, routes: GradRoutes, recomputeLayers: ReadonlySet<number>): Map<number, ActionPiece[]> {
  const out = new Map<number, ActionPiece[]>();
  const rebuilt = new Set<string>();
  for (const id of p.streams.compute) {
    const a = p.actions[id]!;
    const act = actionFromText(a.text);
    if (act.mb === undefined || !["F", "R", "B", "I", "W"].includes(act.kind)) continue;
    const ops = routes.ops[act.stage]!;
    const key = `${act.stage}:${act.mb}`;
    let list: OpNode[];
    if (act.kind === "F" || act.kind === "R") {
      if (act.kind === "R") rebuilt.add(key);
      list = [...ops.forward];
    } else {
      list = [];
      for (const o of act.kind === "I" ? ops.backwardInput : act.kind === "W" ? ops.backwardWeight : ops.backward) {
        const layerKey = `${key}:${o.layer}`;
        if (recomputeLayers.has(o.layer) && !rebuilt.has(key) && !rebuilt.has(layerKey)) {
          rebuilt.add(layerKey);
          list.push(...ops.forward.filter((f) => f.layer === o.layer));
        }
        list.push(o);
      }
    }
    const pieces: ActionPiece[] = [];
    for (const o of list) {
      const last = pieces[pieces.length - 1];
      if (last && last.layer === o.layer) (last.ops as OpNode[]).push(o);
      else pieces.push({ action: a, layer: o.layer, ops: [o] });
    }
    out.set(id, pieces);
  }
  return out;
}

export function programPieces(p: PlanProgram, routes: GradRoutes, recomputeLayers: ReadonlySet<number>): ActionPiece[] {
  const computed = computePieces(p, routes, recomputeLayers);
  const nodes: ActionPiece[] = [];
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  const byLayer = new Map<number, Map<number, { first: number; last: number }>>();
  for (const a of p.actions) {
    const pieces = computed.get(a.id) ?? [{ action: a }];
    first.set(a.id, nodes.length);
    const layers = new Map<number, { first: number; last: number }>();
    for (const piece of pieces) {
      if (piece.layer !== undefined) {
        const seen = layers.get(piece.layer);
        layers.set(piece.layer, { first: seen?.first ?? nodes.length, last: nodes.length });
      }
      nodes.push(piece);
    }
    last.set(a.id, nodes.length - 1);
    byLayer.set(a.id, layers);
  }
  const preds = nodes.map(() => new Set<number>());
  const chain = (from: number, to: number): void => {
    if (from !== to) preds[to]!.add(from);
  };
  // Within an action its pieces run in order; streams run their actions in order.
  for (const a of p.actions) for (let i = first.get(a.id)! + 1; i <= last.get(a.id)!; i++) chain(i - 1, i);
  for (const stream of [p.streams.compute, p.streams.comm]) for (let i = 1; i < stream.length; i++) chain(last.get(stream[i - 1]!)!, first.get(stream[i]!)!);
  for (const a of p.actions) {
    for (const d of a.deps) chain(last.get(d)!, first.get(a.id)!);
    // partial [x, layer]: x has finished that layer (its last run of it; all of x when it has none).
    for (const [x, layer] of a.partial ?? []) chain(byLayer.get(x)!.get(layer)?.last ?? last.get(x)!, first.get(a.id)!);
    // gates [layer, x]: x has finished before this action first runs that layer.
    for (const [layer, x] of a.gates ?? []) chain(last.get(x)!, byLayer.get(a.id)!.get(layer)?.first ?? first.get(a.id)!);
  }
  const succ = nodes.map(() => [] as number[]);
  const missing = preds.map((s) => s.size);
  preds.forEach((s, i) => s.forEach((d) => succ[d]!.push(i)));
  const ready = nodes.flatMap((_, i) => (missing[i] === 0 ? [i] : []));
  const key = (i: number): [number, number, number] => [nodes[i]!.action.start, nodes[i]!.action.end, i];
  const out: ActionPiece[] = [];
  while (ready.length > 0) {
    ready.sort((a, b) => {
      const [x, y] = [key(a), key(b)];
      return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
    });
    const i = ready.shift()!;
    out.push(nodes[i]!);
    for (const s of succ[i]!) if (--missing[s] === 0) ready.push(s);
  }
  if (out.length !== nodes.length) throw new Error(`internal: program ${p.id}'s actions have a dependency cycle even layer by layer`);
  return out;
}
