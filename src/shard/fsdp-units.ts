// FSDP units of a stage: which layers' parameters are gathered and sharded together (by @fsdp_unit
// annotation, else FairScale-style size-based auto-wrap), and each unit's padded flat parameter.
import type { LayerInfo } from "../graph/graph.js";
import type { StageParam } from "./stage-params.js";
import type { FlatMember, FlatShard, FsdpUnit } from "./types.js";

export interface UnitGrouping {
  /** `annotation` when some stage layer carries @fsdp_unit (one unit per such layer), else `size`. */
  readonly policy: "annotation" | "size";
  /** Inner units' layers, ascending within and across groups; the root takes every other layer. */
  readonly inner: readonly (readonly number[])[];
  readonly root: readonly number[];
}

/**
 * Groups the stage's layers that hold parameters. With @fsdp_unit annotations each annotated layer is a unit
 * of its own. Otherwise consecutive layers accumulate until the unit holds at least `minParams` parameters
 * (size-based auto-wrap, FairScale's `size_based_auto_wrap_policy` applied to the layer sequence); a tail
 * below the threshold is left to the root unit, as auto-wrap leaves small modules to the outermost FSDP.
 */
export function groupUnits(
  layers: readonly Pick<LayerInfo, "index" | "annotations">[],
  params: readonly Pick<StageParam, "layer" | "numel">[],
  minParams: number,
): UnitGrouping {
  if (!(Number.isFinite(minParams) && minParams > 0)) throw new Error(`internal: fsdpMinParams must be a positive number, got ${minParams}`);
  const perLayer = new Map<number, number>();
  for (const p of params) perLayer.set(p.layer, (perLayer.get(p.layer) ?? 0) + p.numel);
  const holding = layers.filter((l) => (perLayer.get(l.index) ?? 0) > 0);
  if (holding.some((l) => l.annotations.fsdpUnit)) {
    return {
      policy: "annotation",
      inner: holding.filter((l) => l.annotations.fsdpUnit).map((l) => [l.index]),
      root: holding.filter((l) => !l.annotations.fsdpUnit).map((l) => l.index),
    };
  }
  const inner: number[][] = [];
  let current: number[] = [];
  let count = 0;
  for (const l of holding) {
    current.push(l.index);
    count += perLayer.get(l.index)!;
    if (count >= minParams) {
      inner.push(current);
      current = [];
      count = 0;
    }
  }
  return { policy: "size", inner, root: current };
}

/** One unit's flat parameter: members (the parameters filed under `layers`) packed in declaration order,
 *  padded to a multiple of the group size so every rank holds an equal shard (FairScale FlatParameter +
 *  FSDP's _shard_parameters). Its span also covers layers of the stage that read a member elsewhere.
 *  `paramsOf(layer)`: the positions in `params` of the parameters filed under a layer (fsdpUnits indexes
 *  them once: looking through every parameter of the stage for each unit is quadratic in a deep stage). */
export function flattenUnit(
  index: number,
  root: boolean,
  layers: readonly number[],
  params: readonly StageParam[],
  groupSize: number,
  paramsOf: (layer: number) => readonly number[] = layerIndex(params),
): FsdpUnit {
  const chosen = [...new Set(layers)].flatMap(paramsOf).sort((a, b) => a - b);
  const members: FlatMember[] = [];
  // The layers that read a member, as a span: running bounds (a deep root unit reads thousands).
  let first = Infinity;
  let last = -Infinity;
  const reads = (l: number): void => {
    first = Math.min(first, l);
    last = Math.max(last, l);
  };
  layers.forEach(reads);
  let offset = 0;
  for (const k of chosen) {
    const p = params[k]!;
    members.push({ name: p.name, offset, numel: p.numel });
    offset += p.numel;
    p.useLayers.forEach(reads);
  }
  const numel = offset;
  const shardNumel = Math.ceil(numel / groupSize);
  const paddedNumel = shardNumel * groupSize;
  const shards: FlatShard[] = [];
  // Members lie end to end in offset order, so the ones meeting rank r's range [lo, hi) are a run that moves
  // up with r: from the first whose end passes lo, while they start below hi.
  let m = 0;
  for (let rank = 0; rank < groupSize; rank++) {
    const lo = rank * shardNumel;
    const hi = lo + shardNumel;
    while (m < members.length && members[m]!.offset + members[m]!.numel <= lo) m++;
    const pieces: FlatShard["pieces"][number][] = [];
    for (let j = m; j < members.length && members[j]!.offset < hi; j++) {
      const x = members[j]!;
      pieces.push({ name: x.name, from: Math.max(lo, x.offset) - x.offset, to: Math.min(hi, x.offset + x.numel) - x.offset });
    }
    shards.push({ rank, offset: lo, numel: shardNumel, pieces });
  }
  return { index, root, layers: [...layers], span: { first, last }, params: members, numel, paddedNumel, padding: paddedNumel - numel, shardNumel, shards };
}

/** Positions in `params` by the layer each is filed under, ascending. */
function layerIndex(params: readonly StageParam[]): (layer: number) => readonly number[] {
  const byLayer = new Map<number, number[]>();
  params.forEach((p, k) => {
    const list = byLayer.get(p.layer);
    if (list) list.push(k);
    else byLayer.set(p.layer, [k]);
  });
  return (layer) => byLayer.get(layer) ?? [];
}

/** The stage's units, numbered in order of first forward use (lowest layer). */
export function fsdpUnits(layers: readonly LayerInfo[], params: readonly StageParam[], groupSize: number, minParams: number): FsdpUnit[] {
  const g = groupUnits(layers, params, minParams);
  const groups = g.inner.map((ls) => ({ layers: ls, root: false }));
  if (g.root.length > 0) groups.push({ layers: g.root, root: true });
  const paramsOf = layerIndex(params);
  return groups
    .map((u) => flattenUnit(0, u.root, u.layers, params, groupSize, paramsOf))
    .sort((a, b) => a.span.first - b.span.first)
    .map((u, index) => ({ ...u, index }));
}
