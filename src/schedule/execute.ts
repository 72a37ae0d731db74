// The stream engine: runs a lowered schedule as-soon-as-possible under given durations, or finds where it sticks.
import { formatAction, isP2PKind, isShardKind } from "./action.js";
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
  /** P2P with deps done: why the rendezvous never happens. */
  readonly partner?: { readonly kind: "missing" } | { readonly kind: "not-ready"; readonly id: number };
}

export interface Execution {
  /** Start and finish time of every action by id; NaN for actions that never run. */
  readonly start: Float64Array;
  readonly end: Float64Array;
  readonly complete: boolean;
  readonly makespan: number;
  readonly blocked: readonly Blocked[];
}

/**
 * Each action starts at the latest of: its stream's previous finish, its deps' finishes and, for a p2p pair,
 * the same for its partner. The result does not depend on the order in which streams are visited, and
 * whether every action runs does not depend on the durations either: nothing that becomes ready can become
 * unready, so a schedule that completes with unit durations completes with any positive durations.
 * The engine expects dense ids (actions[i].id === i); validation checks that before running it.
 * `delay(id, dep)`, when given, is a latency between dep's finish and id's start (lowering's reference run).
 */
export function execute(s: LoweredSchedule, duration: (a: LoweredAction) => number, delay?: (id: number, dep: number) => number): Execution {
  const n = s.actions.length;
  for (const a of s.actions) {
    if (isShardKind(a.action.kind)) {
      throw new Error(
        `schedule engine: shard action ${formatAction(a.action)} on rank ${a.rank} is not supported yet ` +
          `(collective group rendezvous semantics come with the sharding work)`,
      );
    }
  }
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
      } else {
        const t0 = Math.max(free[si]!, depsEnd(a));
        const t1 = t0 + duration(a);
        head[si]!++;
        free[si] = t1;
        finish(id, t0, t1);
      }
    }
  }

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
    } else blocked.push(b);
  });
  let makespan = 0;
  for (const t of free) makespan = Math.max(makespan, t);
  return { start, end, complete: blocked.length === 0, makespan, blocked };
}
