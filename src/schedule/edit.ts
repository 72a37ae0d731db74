// Editing a lowered schedule: the plan inserts shard actions (collectives, OPTIMIZER, FREE) and the edges
// that tie them to the pipeline's actions, then validates the result like any other schedule.
import type { Action } from "./action.js";
import type { LoweredAction, LoweredSchedule, RankStreams, StreamName } from "./lowered.js";

export interface NewAction {
  readonly rank: number;
  readonly stream: StreamName;
  readonly action: Action;
  /** Ids (of the base schedule or of earlier additions) that must finish first. */
  readonly deps?: readonly number[];
  readonly group?: readonly number[];
  readonly groupSize?: number;
  readonly bytes?: number;
}

/** Where in its stream an added action goes: at an end, or next to an action of the same rank and stream. */
export type Place = "start" | "end" | { readonly before: number } | { readonly after: number };

/**
 * Collects additions and builds a new schedule; the base is not modified. The base's ids stay as they are
 * (so ids the plan looked up remain valid) and added actions get the next ids in the order they were added.
 * Several actions put at the same place keep the order in which they were added: two `{ before: x }` end
 * up as `a b x`, two `{ after: x }` as `x a b`. Misuse (an anchor on another stream, an unknown id) throws:
 * the plan is program code; what it builds is checked by validate() like everything else.
 */
export class ScheduleEditor {
  private readonly added: LoweredAction[] = [];
  private readonly extraDeps = new Map<number, number[]>();
  /** Per anchor id: additions placed before and after it; per stream key: at its start and end. */
  private readonly before = new Map<number, number[]>();
  private readonly after = new Map<number, number[]>();
  private readonly atStart = new Map<string, number[]>();
  private readonly atEnd = new Map<string, number[]>();

  constructor(private readonly base: LoweredSchedule) {}

  /** Adds an action and returns its id. */
  add(a: NewAction, place: Place = "end"): number {
    const id = this.base.actions.length + this.added.length;
    if (!(Number.isSafeInteger(a.rank) && a.rank >= 0 && a.rank < this.base.ranks)) throw new Error(`ScheduleEditor: rank ${a.rank} is outside 0..${this.base.ranks - 1}`);
    for (const d of a.deps ?? []) this.known(d);
    const out: { -readonly [K in keyof LoweredAction]: LoweredAction[K] } = { id, rank: a.rank, stream: a.stream, action: a.action, deps: [...(a.deps ?? [])] };
    if (a.group !== undefined) out.group = Object.freeze([...a.group]);
    if (a.groupSize !== undefined) out.groupSize = a.groupSize;
    if (a.bytes !== undefined) out.bytes = a.bytes;
    if (place === "start" || place === "end") push(place === "start" ? this.atStart : this.atEnd, `${a.rank}:${a.stream}`, id);
    else {
      const anchor = "before" in place ? place.before : place.after;
      const x = this.get(anchor);
      if (x.rank !== a.rank || x.stream !== a.stream) {
        throw new Error(`ScheduleEditor: cannot place an action of rank ${a.rank} ${a.stream} next to action #${anchor} on rank ${x.rank} ${x.stream}`);
      }
      push("before" in place ? this.before : this.after, anchor, id);
    }
    this.added.push(Object.freeze(out));
    return id;
  }

  /** Makes an existing action (of the base or added) wait for more actions as well. */
  addDeps(id: number, deps: readonly number[]): void {
    this.get(id);
    for (const d of deps) this.known(d);
    const list = this.extraDeps.get(id) ?? [];
    list.push(...deps);
    this.extraDeps.set(id, list);
  }

  build(): LoweredSchedule {
    const { base } = this;
    const actions = [...base.actions, ...this.added].map((a) => {
      const extra = this.extraDeps.get(a.id);
      return extra ? Object.freeze({ ...a, deps: [...a.deps, ...extra.filter((d) => !a.deps.includes(d))] }) : a;
    });
    const expand = (ids: readonly number[], out: number[]): void => {
      for (const id of ids) {
        const before = this.before.get(id);
        if (before) expand(before, out);
        out.push(id);
        const after = this.after.get(id);
        if (after) expand(after, out);
      }
    };
    const streams: RankStreams[] = base.streams.map((st, rank) => {
      const one = (stream: StreamName): number[] => {
        const out: number[] = [];
        expand([...(this.atStart.get(`${rank}:${stream}`) ?? []), ...st[stream], ...(this.atEnd.get(`${rank}:${stream}`) ?? [])], out);
        return out;
      };
      return { compute: one("compute"), comm: one("comm") };
    });
    return { ...base, actions, streams };
  }

  private get(id: number): LoweredAction {
    const a = id < this.base.actions.length ? this.base.actions[id] : this.added[id - this.base.actions.length];
    if (!a) throw new Error(`ScheduleEditor: no action #${id}`);
    return a;
  }

  private known(id: number): void {
    if (!Number.isSafeInteger(id) || id < 0 || id >= this.base.actions.length + this.added.length) throw new Error(`ScheduleEditor: no action #${id} to depend on`);
  }
}

function push<K>(map: Map<K, number[]>, key: K, id: number): void {
  const list = map.get(key);
  if (list) list.push(id);
  else map.set(key, [id]);
}
