// The stream engine: runs a lowered schedule as-soon-as-possible under given durations, or finds where it sticks.
import { isP2PKind } from "./action.js";
import { matchCollectives, SOLO, type CollectiveMatching } from "./collectives.js";
import type { LoweredAction, LoweredSchedule, StreamName } from "./lowered.js";

export interface Blocked {
  readonly rank: number;
  readonly stream: StreamName;
  /** The action at the front of the stream that can never start. */
  readonly id: number;
  /** When the stream ran out of work (its last finish time; 0 if it never ran anything). */
  readonly since: number;
  /** Dependencies of `id` that never finish. */
  readonly waitsOn: readonly number[];
  /**
   * P2P or group collective with deps done: why the rendezvous never happens. `not-ready` names the partner
   * (for a collective, the first member in group order) that is not at the front of its stream with its
   * deps done; `missing`, that a partner or member does not exist (or the group is unusable).
   */
  readonly partner?: { readonly kind: "missing" } | { readonly kind: "not-ready"; readonly id: number };
}

export interface Execution {
  /** Start and finish time of every action by id; NaN for actions that never run. */
  readonly start: Float64Array;
  readonly end: Float64Array;
  readonly complete: boolean;
  readonly makespan: number;
  readonly blocked: readonly Blocked[];
  /** How group collectives were matched (collectives.ts); undefined when the schedule has none. */
  readonly collectives?: CollectiveMatching;
}

/**
 * Each action starts at the latest of: its stream's previous finish, its deps' finishes and, for a p2p pair
 * or a group collective, the same for its partner or every other member (lowered.ts); a collective lasts
 * the longest `duration` of its members. The result does not depend on the order in which streams are
 * visited, and whether every action runs does not depend on the durations either: nothing that becomes
 * ready can become unready, so a schedule that completes with unit durations completes with any positive
 * durations.
 * The engine expects dense ids (actions[i].id === i); validation checks that before running it.
 * `delay(id, dep)`, when given, is a latency between dep's finish and id's start (lowering's reference run).
 */
export function execute(s: LoweredSchedule, duration: (a: LoweredAction) => number, delay?: (id: number, dep: number) => number): Execution {
  const n = s.actions.length;
  const collectives = matchCollectives(s);
  const setOf = collectives?.setOf;
  // Stream si is rank si >> 1's compute (even si) or comm (odd si) stream.
  const lists: (readonly number[])[] = [];
  for (const st of s.streams) lists.push(st.compute, st.comm);
  const streamOf = new Int32Array(n).fill(-1);
  lists.forEach((ids, si) => {
    for (const id of ids) if (id >= 0 && id < n) streamOf[id] = si;
  });
  const head = new Int32Array(lists.length);
  const free = new Float64Array(lists.length);
  const start = new Float64Array(n).fill(NaN);
  const end = new Float64Array(n).fill(NaN);
  // A stream waits for one action at a time, so the streams waiting for an action form an intrusive list:
  // firstWaiter[action] → nextWaiter[stream] → … (-1 ends it); no allocation on this hot path. A stream
  // can sit in the work list twice and so ask twice for the same action: waitingOn keeps it listed once.
  const firstWaiter = new Int32Array(n).fill(-1);
  const nextWaiter = new Int32Array(lists.length).fill(-1);
  const waitingOn = new Int32Array(lists.length).fill(-1);
  const work: number[] = lists.map((_, i) => lists.length - 1 - i);

  const done = (id: number): boolean => id >= 0 && id < n && !Number.isNaN(end[id]!);
  const firstPending = (a: LoweredAction): number => {
    for (const d of a.deps) if (!done(d)) return d;
    return -1;
  };
  const depsEnd = (a: LoweredAction): number => {
    let t = 0;
    if (delay) for (const d of a.deps) t = Math.max(t, end[d]! + delay(a.id, d));
    else for (const d of a.deps) t = Math.max(t, end[d]!);
    return t;
  };
  const wait = (id: number, si: number): void => {
    if (waitingOn[si] === id) return;
    waitingOn[si] = id;
    nextWaiter[si] = firstWaiter[id]!;
    firstWaiter[id] = si;
  };
  const finish = (id: number, t0: number, t1: number): void => {
    start[id] = t0;
    end[id] = t1;
    for (let si = firstWaiter[id]!; si !== -1; si = nextWaiter[si]!) {
      waitingOn[si] = -1;
      work.push(si);
    }
    firstWaiter[id] = -1;
  };
  /** The live partner of a p2p action, if it is at the front of its stream with its deps done. */
  const readyPartner = (a: LoweredAction): LoweredAction | undefined => {
    const m = a.match;
    if (m === undefined || m < 0 || m >= n) return undefined;
    const p = s.actions[m]!;
    const ps = streamOf[m]!;
    if (p.match !== a.id || ps < 0 || lists[ps]![head[ps]!] !== m || firstPending(p) !== -1) return undefined;
    return p;
  };
  /** The members of a group collective when every one is at the front of its stream with its deps done. */
  const readyMembers = (id: number): Int32Array | undefined => {
    const k = setOf![id]!;
    if (k < 0) return undefined;
    const members = collectives!.sets[k]!;
    for (const m of members) {
      if (m === -1) return undefined;
      if (m === id) continue;
      const ms = streamOf[m]!;
      if (ms < 0 || lists[ms]![head[ms]!] !== m || firstPending(s.actions[m]!) !== -1) return undefined;
    }
    return members;
  };

  while (work.length > 0) {
    const si = work.pop()!;
    const ids = lists[si]!;
    while (head[si]! < ids.length) {
      const id = ids[head[si]!]!;
      const a = s.actions[id];
      if (!a) break;
      const pending = firstPending(a);
      if (pending !== -1) {
        if (pending >= 0 && pending < n) wait(pending, si);
        break;
      }
      if (isP2PKind(a.action.kind)) {
        // Whichever side arrives second runs the pair; the first simply stops and is pushed back below.
        const p = readyPartner(a);
        if (!p) break;
        const ps = streamOf[p.id]!;
        const t0 = Math.max(free[si]!, free[ps]!, depsEnd(a), depsEnd(p));
        const t1 = t0 + duration(a.action.kind.startsWith("SEND") ? a : p);
        head[si]!++;
        head[ps]!++;
        free[si] = t1;
        free[ps] = t1;
        finish(id, t0, t1);
        finish(p.id, t0, t1);
        work.push(ps);
      } else if (setOf !== undefined && setOf[id] !== SOLO) {
        // A group collective: like a pair, the last member to arrive runs it for everyone.
        const members = readyMembers(id);
        if (!members) break;
        let t0 = 0;
        let dt = 0;
        for (const m of members) {
          const member = s.actions[m]!;
          t0 = Math.max(t0, free[streamOf[m]!]!, depsEnd(member));
          dt = Math.max(dt, duration(member));
        }
        const t1 = t0 + dt;
        for (const m of members) {
          const ms = streamOf[m]!;
          head[ms]!++;
          free[ms] = t1;
          finish(m, t0, t1);
          if (ms !== si) work.push(ms);
        }
      } else {
        const t0 = Math.max(free[si]!, depsEnd(a));
        const t1 = t0 + duration(a);
        head[si]!++;
        free[si] = t1;
        finish(id, t0, t1);
      }
    }
  }

  /** Why a stuck group collective with its deps done waits: the first member in group order that is not ready. */
  const stuckMember = (id: number): NonNullable<Blocked["partner"]> => {
    const k = setOf![id]!;
    const members = k < 0 ? undefined : collectives!.sets[k]!;
    if (!members || members.includes(-1)) return { kind: "missing" };
    for (const m of members) {
      if (m === id) continue;
      const ms = streamOf[m]!;
      if (ms < 0) return { kind: "missing" };
      if (lists[ms]![head[ms]!] !== m || firstPending(s.actions[m]!) !== -1) return { kind: "not-ready", id: m };
    }
    return { kind: "missing" };
  };
  const blocked: Blocked[] = [];
  lists.forEach((ids, si) => {
    if (head[si]! >= ids.length) return;
    const id = ids[head[si]!]!;
    const a = s.actions[id];
    const waitsOn = a ? a.deps.filter((d) => !done(d)) : [];
    const stream: StreamName = si % 2 === 0 ? "compute" : "comm";
    const b: Blocked = { rank: si >> 1, stream, id, since: free[si]!, waitsOn };
    if (a && waitsOn.length === 0 && isP2PKind(a.action.kind)) {
      const m = a.match;
      const valid = m !== undefined && m >= 0 && m < n && s.actions[m]!.match === id && streamOf[m]! >= 0;
      blocked.push({ ...b, partner: valid ? { kind: "not-ready", id: m } : { kind: "missing" } });
    } else if (a && waitsOn.length === 0 && setOf !== undefined && setOf[id] !== SOLO) {
      blocked.push({ ...b, partner: stuckMember(id) });
    } else blocked.push(b);
  });
  let makespan = 0;
  for (const t of free) makespan = Math.max(makespan, t);
  const run = { start, end, complete: blocked.length === 0, makespan, blocked };
  return collectives ? { ...run, collectives } : run;
}
