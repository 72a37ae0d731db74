// Collectives in a lowered schedule: the key that matches a group's members, the matching, and FREE's gather.
import { isCollectiveKind } from "./action.js";
import type { LoweredAction, LoweredSchedule } from "./lowered.js";

/**
 * What a collective's members agree on: the action text without its stage, then the group, e.g.
 * `ALL_REDUCE2u1 [0,1]` or `BROADCASTu4@2 [2,3]`. The stage is left out because the members of a group
 * that spans the pipeline (a global-norm ALL_REDUCE) each run their own stages; kind, micro-batch, unit
 * and root must agree. Two different collectives of one group that share a key are told apart by their
 * occurrence: the k-th on one member meets the k-th on every other (give them different units to make
 * the intent explicit).
 */
export function collectiveKey(a: LoweredAction): string {
  const { kind, mb, unit, peer } = a.action;
  let text: string = kind;
  if (mb !== undefined) text += mb;
  if (unit !== undefined) text += `u${unit}`;
  if (peer !== undefined) text += `@${peer}`;
  return `${text} [${(a.group ?? []).join(",")}]`;
}

/** Why a collective's group is unusable, or undefined: ascending ranks of the schedule, its own rank among them. */
export function groupError(s: LoweredSchedule, a: LoweredAction): string | undefined {
  const g = a.group;
  if (g === undefined) return "needs its group (the simulated ranks that take part)";
  if (!Array.isArray(g) || g.length === 0) return "has an empty group";
  for (let i = 0; i < g.length; i++) {
    const r = g[i]!;
    if (!(Number.isSafeInteger(r) && r >= 0 && r < s.ranks)) return `has rank ${r} in its group, outside 0..${s.ranks - 1}`;
    if (i > 0 && !(r > g[i - 1]!)) return `has group [${g.join(",")}], which is not in ascending order without repeats`;
  }
  if (!g.includes(a.rank)) return `has group [${g.join(",")}], which leaves out its own rank ${a.rank}`;
  return undefined;
}

/** SOLO: not a group collective (any other action, or a group of one); NEVER: a broken group, never runs. */
export const SOLO = -1;
export const NEVER = -2;

export interface CollectiveMatching {
  /** Per action id: index of its member set in `sets`, or SOLO / NEVER. */
  readonly setOf: Int32Array;
  /** Per set: the members' ids in group order, -1 where that rank never enters the collective. */
  readonly sets: readonly Int32Array[];
  /** Per set: its key and which occurrence of it (0 for the first) it is on every member. */
  readonly keys: readonly string[];
  readonly occurrence: readonly number[];
}

/**
 * Matches the group collectives of every rank, each rank's streams taken in order (comm, then compute,
 * where validation reports a misplaced one). Undefined when the schedule has none, so that pipelines
 * without collectives pay one pass over their kinds and nothing else.
 */
export function matchCollectives(s: LoweredSchedule): CollectiveMatching | undefined {
  const n = s.actions.length;
  let any = false;
  for (const a of s.actions) {
    if (isCollectiveKind(a.action.kind) && !(a.group !== undefined && a.group.length === 1 && a.group[0] === a.rank)) {
      any = true;
      break;
    }
  }
  if (!any) return undefined;
  const setOf = new Int32Array(n).fill(SOLO);
  const sets: Int32Array[] = [];
  const keys: string[] = [];
  const occurrence: number[] = [];
  const bySlot = new Map<string, number>();
  s.streams.forEach((st, rank) => {
    const seen = new Map<string, number>();
    for (const list of [st.comm, st.compute]) {
      for (const id of list) {
        const a = s.actions[id];
        if (!a || !isCollectiveKind(a.action.kind)) continue;
        const g = a.group;
        if (g !== undefined && g.length === 1 && g[0] === a.rank && a.rank === rank) continue;
        if (a.rank !== rank || groupError(s, a) !== undefined) {
          setOf[id] = NEVER;
          continue;
        }
        const key = collectiveKey(a);
        const k = seen.get(key) ?? 0;
        seen.set(key, k + 1);
        const slot = `${k} ${key}`;
        let si = bySlot.get(slot);
        if (si === undefined) {
          si = sets.length;
          bySlot.set(slot, si);
          sets.push(new Int32Array(g!.length).fill(-1));
          keys.push(key);
          occurrence.push(k);
        }
        sets[si]![g!.indexOf(rank)] = id;
        setOf[id] = si;
      }
    }
  });
  return { setOf, sets, keys, occurrence };
}

/** The deps of a FREE that are ALL_GATHERs of its stage and unit on its rank: exactly one when it is valid. */
export function freedGathers(s: LoweredSchedule, free: LoweredAction): number[] {
  const out: number[] = [];
  for (const d of free.deps) {
    const g = s.actions[d];
    if (g && g.action.kind === "ALL_GATHER" && g.rank === free.rank && g.action.stage === free.action.stage && g.action.unit === free.action.unit) out.push(d);
  }
  return out;
}
