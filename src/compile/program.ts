// The in-memory form of the per-rank programs while compile builds them: actions with the schedule's Action,
// their stream, dependencies at action or layer granularity, and their duration per layer segment.
import type { Action } from "../schedule/action.js";
import type { PlanActionCollective } from "../plan/plan.js";

export type Stream = "compute" | "comm";

export interface ProgAction {
  /** Peers are global ranks of replica 0 (see plan.ts for how they resolve per replica). */
  readonly action: Action;
  readonly stream: Stream;
  /** Actions that must have finished. */
  readonly deps: number[];
  /** [compute action, layer]: that action has finished that layer. */
  readonly partial: [number, number][];
  /** Compute actions: [layer, action]: the action must have finished before the layer starts. */
  readonly gates: [number, number][];
  readonly collective?: PlanActionCollective;
  /** Compute actions of a stage: the layers in run order, one segment each; otherwise empty (one segment). */
  readonly layers: readonly number[];
  /** Seconds per segment (layers.length of them, or one). */
  seconds: number[];
  /** Cross-program rendezvous (p2p pair, tied or world collective): index into the rendezvous list, or -1. */
  readonly rendezvous: number;
}

export interface Program {
  readonly pipeRank: number;
  readonly stages: readonly number[];
  readonly ranks: readonly number[];
  actions: ProgAction[];
  compute: number[];
  comm: number[];
}

/** Members start together, once each is at the front of its stream with its dependencies met. */
export interface Rendezvous {
  readonly members: { readonly program: number; readonly action: number }[];
}

export function newAction(fields: {
  action: Action;
  stream: Stream;
  seconds: number[];
  layers?: readonly number[];
  deps?: number[];
  partial?: [number, number][];
  collective?: PlanActionCollective;
  rendezvous?: number;
}): ProgAction {
  const a: ProgAction = {
    action: fields.action,
    stream: fields.stream,
    deps: fields.deps ?? [],
    partial: fields.partial ?? [],
    gates: [],
    layers: fields.layers ?? [],
    seconds: fields.seconds,
    rendezvous: fields.rendezvous ?? -1,
  };
  return fields.collective ? { ...a, collective: fields.collective } : a;
}

/** Per layer list of a long compute action: each layer's first index in it. A single-stage plan's actions
 *  run every layer, and the memory plan and the placer ask for a segment per layer and action: a scan each
 *  made that quadratic in depth (20,000 layers: 1.5 s). */
const segmentIndex = new WeakMap<readonly number[], Map<number, number>>();

/** Index of a layer's segment in a compute action (throws when the action does not run that layer). */
export function segmentOf(a: ProgAction, layer: number): number {
  const i = a.layers.length <= 16 ? a.layers.indexOf(layer) : (indexOfLayers(a.layers).get(layer) ?? -1);
  if (i < 0) throw new Error(`internal: a point names layer ${layer}, which the action does not run (layers ${a.layers.join(", ")})`);
  return i;
}

function indexOfLayers(layers: readonly number[]): Map<number, number> {
  let index = segmentIndex.get(layers);
  if (!index) {
    index = new Map();
    for (let i = layers.length - 1; i >= 0; i--) index.set(layers[i]!, i);
    segmentIndex.set(layers, index);
  }
  return index;
}
