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
export function groupUnits(layers: readonly LayerInfo[], params: readonly StageParam[], minParams: number): UnitGrouping {
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
 *  FSDP's _shard_parameters). Its span also covers layers of the stage that read a member elsewhere. */
export function flattenUnit(index: number, root: boolean, layers: readonly number[], params: readonly StageParam[], groupSize: number): FsdpUnit {
  const inUnit = new Set(layers);
  const members: FlatMember[] = [];
  const read = [...layers];
  let offset = 0;
  for (const p of params) {
    if (!inUnit.has(p.layer)) continue;
    members.push({ name: p.name, offset, numel: p.numel });
    offset += p.numel;
    read.push(...p.useLayers);
  }
  const numel = offset;
  const shardNumel = Math.ceil(numel / groupSize);
  const paddedNumel = shardNumel * groupSize;
  const shards: FlatShard[] = [];
  for (let rank = 0; rank < groupSize; rank++) {
    const lo = rank * shardNumel;
    const hi = lo + shardNumel;
    const pieces = members
      .filter((m) => m.offset < hi && m.offset + m.numel > lo)
      .map((m) => ({ name: m.name, from: Math.max(lo, m.offset) - m.offset, to: Math.min(hi, m.offset + m.numel) - m.offset }));
    shards.push({ rank, offset: lo, numel: shardNumel, pieces });
  }
  const span = { first: Math.min(...read), last: Math.max(...read) };
  return { index, root, layers: [...layers], span, params: members, numel, paddedNumel, padding: paddedNumel - numel, shardNumel, shards };
}

/** The stage's units, numbered in order of first forward use (lowest layer). */
export function fsdpUnits(layers: readonly LayerInfo[], params: readonly StageParam[], groupSize: number, minParams: number): FsdpUnit[] {
  const g = groupUnits(layers, params, minParams);
  const groups = g.inner.map((ls) => ({ layers: ls, root: false }));
  if (g.root.length > 0) groups.push({ layers: g.root, root: true });
  return groups
    .map((u) => flattenUnit(0, u.root, u.layers, params, groupSize))
    .sort((a, b) => a.span.first - b.span.first)
    .map((u, index) => ({ ...u, index }));
}
