// Lowering: a compute order becomes per-rank compute and comm streams with SEND/RECV pairs and explicit deps.
import { ActionIndex } from "./action-index.js";
import { formatAction, isComputeKind, p2pAction, type Action } from "./action.js";
import { computeSeconds, type ScheduleCosts } from "./costs.js";
import { execute } from "./execute.js";
import type { LoweredAction, LoweredSchedule, RankStreams } from "./lowered.js";
import type { ComputeOrder } from "./orders/order.js";
import { dataProducers, refAction, sendFor, type Ref } from "./rules.js";

export interface LowerOptions {
  /**
   * The costs the schedule is expected to run under; they only decide the order of the comm streams
   * (unit durations and free transfers when absent). Any costs give a deadlock-free order.
   */
  readonly costs?: ScheduleCosts;
}

/** One result that crosses ranks: where it comes from, where it goes, and its place in the global order. */
interface Transfer {
  /** Id of the producing compute action in the order's numbering (rank by rank, in order). */
  readonly producer: number;
  readonly from: Ref;
  readonly toRank: number;
  readonly toStage: number;
  /** When the data is ready in the reference run under the costs, and in the unit-duration run. */
  ready: number;
  step: number;
  /** Lowered ids of its SEND and RECV (-1 until assigned). */
  send: number;
  recv: number;
}

/**
 * Every result that crosses ranks gets a SEND on the producer's comm stream and a RECV on the consumer's;
 * the consumer depends on the RECV and the SEND on the producer, so transfers overlap compute.
 *
 * A comm stream runs one transfer at a time, so its order matters: a RECV whose data comes late holds up
 * every transfer behind it. Comm streams are ordered by one global key: the time the data is ready when
 * the compute order runs under `options.costs` with uncontended transfers (unit durations and free
 * transfers without costs), then the same time with unit durations (zero-cost actions make the first tie),
 * then direction, stage and micro-batch. Both ranks of a pair therefore see their transfers in the same
 * relative order, and every wait points to something with a smaller key or an earlier compute step, so
 * the lowered schedule cannot deadlock when the compute order alone does not (validation still proves it).
 * With free transfers and the same costs the lowered schedule runs exactly like the compute order; with
 * costly ones, the transfer whose data is ready first goes first.
 */
export function lower(order: ComputeOrder, options: LowerOptions = {}): LoweredSchedule {
  const flat = numberOrder(order);
  const { index } = flat;
  const transfers: Transfer[] = [];
  // Per compute action (by order id), its inputs in data-flow order: a same-rank producer's order id (≥ 0),
  // or ~t for incoming transfer t (< 0). Kept in one list so the lowered deps come out in the rules' order.
  const inputs: number[][] = new Array(flat.actions.length);
  flat.actions.forEach((action, id) => {
    const rank = flat.rankOf[id]!;
    const list: number[] = [];
    for (const p of dataProducers(action, rank, order, index.has)) {
      const d = index.findRef(p);
      if (d === undefined) throw new Error(`lower: ${formatAction(action)} on rank ${rank} reads ${formatAction(refAction(p))}, which the order lacks`);
      if (p.rank === rank) list.push(d);
      else {
        list.push(~transfers.length);
        transfers.push({ producer: d, from: p, toRank: rank, toStage: action.stage, ready: Infinity, step: Infinity, send: -1, recv: -1 });
      }
    }
    inputs[id] = list;
  });

  const reference = referenceRun(order, flat, inputs, transfers);
  const steps = reference(() => 1, () => 0);
  const costs = options.costs;
  const ready = costs
    ? reference(
        (a) => duration(computeSeconds(costs, a), a),
        (t) => {
          const send = sendFor(t.from, t.toRank);
          const bytes = costs.boundaryBytes(send.stage, send.mb, send.kind === "SEND_F" ? "forward" : "backward");
          return duration(costs.transfer(t.from.rank, t.toRank, bytes), refAction(send));
        },
      )
    : steps;
  // NaN (never runs: the order itself deadlocks) sorts last, as Infinity.
  for (const t of transfers) {
    t.ready = Number.isNaN(ready[t.producer]!) ? Infinity : ready[t.producer]!;
    t.step = Number.isNaN(steps[t.producer]!) ? Infinity : steps[t.producer]!;
  }

  const comm: Transfer[][] = order.perRank.map(() => []);
  for (const t of transfers) comm[t.from.rank]!.push(t), comm[t.toRank]!.push(t);
  for (const list of comm) list.sort(byKey);
  return assemble(order, inputs, transfers, comm);
}

/**
 * The lowered schedule, built directly from what lowering already knows (the same result as wiring the
 * stream lists, which the listing round trip tests, without looking every dependency up again): ids rank by
 * rank, compute stream before comm stream; a compute action depends on its same-rank producers and on the
 * RECVs of its incoming transfers, a SEND on the producer it ships.
 */
function assemble(order: ComputeOrder, inputs: readonly number[][], transfers: readonly Transfer[], comm: readonly Transfer[][]): LoweredSchedule {
  // First pass: ids. Every dependency is on the same rank, but a compute action may wait for a RECV listed
  // after it, so every id is known before any action is built.
  const lowered = new Int32Array(inputs.length);
  let next = 0;
  let flatId = 0;
  order.perRank.forEach((compute, rank) => {
    for (let i = 0; i < compute.length; i++) lowered[flatId++] = next++;
    for (const t of comm[rank]!) {
      if (t.from.rank === rank) t.send = next++;
      else t.recv = next++;
    }
  });
  const actions: LoweredAction[] = [];
  const streams: RankStreams[] = [];
  flatId = 0;
  order.perRank.forEach((list, rank) => {
    const compute: number[] = [];
    for (const action of list) {
      const deps = inputs[flatId++]!.map((d) => (d >= 0 ? lowered[d]! : transfers[~d]!.recv));
      compute.push(actions.length);
      actions.push(Object.freeze({ id: actions.length, rank, stream: "compute", action, deps }));
    }
    const ids: number[] = [];
    for (const t of comm[rank]!) {
      const id = actions.length;
      ids.push(id);
      const fwd = t.from.kind === "F";
      if (t.send === id) {
        const action = p2pAction(fwd ? "SEND_F" : "SEND_B", t.from.stage, t.from.mb, t.toRank);
        actions.push(Object.freeze({ id, rank, stream: "comm", action, deps: [lowered[t.producer]!], match: t.recv }));
      } else {
        const action = p2pAction(fwd ? "RECV_F" : "RECV_B", t.toStage, t.from.mb, t.from.rank);
        actions.push(Object.freeze({ id, rank, stream: "comm", action, deps: [], match: t.send }));
      }
    }
    streams.push({ compute, comm: ids });
  });
  const { schedule: name, ranks, stages, microBatches, stageRank } = order;
  return { name, ranks, stages, microBatches, stageRank, actions, streams };
}

/** The order's compute actions numbered rank by rank (parallel arrays: no object per action). */
interface NumberedOrder {
  readonly index: ActionIndex;
  readonly actions: readonly Action[];
  readonly rankOf: Int32Array;
}

/** Numbers and indexes the order's compute actions; the order must be well formed (it is generated). */
function numberOrder(order: ComputeOrder): NumberedOrder {
  const index = new ActionIndex(order);
  const actions: Action[] = [];
  const rankOf = new Int32Array(order.perRank.reduce((n, list) => n + list.length, 0));
  order.perRank.forEach((list, rank) => {
    for (const action of list) {
      const fail = (why: string): never => {
        throw new Error(`lower: ${formatAction(action)} on rank ${rank} ${why}`);
      };
      if (!isComputeKind(action.kind)) fail("is not a compute action");
      if (order.stageRank[action.stage] !== rank) fail(`is not where stage ${action.stage} is placed`);
      if (!index.add(rank, action, actions.length)) fail("is repeated or outside the pipeline");
      rankOf[actions.length] = rank;
      actions.push(action);
    }
  });
  return { index, actions, rankOf };
}

function byKey(a: Transfer, b: Transfer): number {
  const dir = (t: Transfer): number => (t.from.kind === "F" ? 0 : 1);
  return cmp(a.ready, b.ready) || cmp(a.step, b.step) || dir(a) - dir(b) || a.from.stage - b.from.stage || a.from.mb - b.from.mb;
}

/** Like a − b, but Infinity (never ready: an order that deadlocks, left for validation) equals itself. */
function cmp(a: number, b: number): number {
  return a === b ? 0 : a < b ? -1 : 1;
}

function duration(t: number, a: Action): number {
  if (!(Number.isFinite(t) && t >= 0)) throw new Error(`lower: cost of ${formatAction(a)} is ${t}, not a duration`);
  return t;
}

/**
 * The reference run: finish time of every compute action (NaN when it never runs) when the compute order
 * runs with each transfer as a plain latency between producer and consumer, never queueing behind another
 * transfer. That is a feasible run of the order, which is all the deadlock argument needs, and it sees the
 * delays that transfers add along each path. The graph is built once; each call runs other durations.
 */
function referenceRun(
  order: ComputeOrder,
  flat: NumberedOrder,
  inputs: readonly number[][],
  transfers: readonly Transfer[],
): (compute: (a: Action) => number, transfer: (t: Transfer) => number) => Float64Array {
  const actions: LoweredAction[] = flat.actions.map((action, id) => {
    const list = inputs[id]!;
    // Same-rank inputs are already order ids: share the list unless a transfer needs replacing.
    const deps = list.every((d) => d >= 0) ? list : list.map((d) => (d >= 0 ? d : transfers[~d]!.producer));
    return { id, rank: flat.rankOf[id]!, stream: "compute", action, deps };
  });
  let next = 0;
  const streams = order.perRank.map((list) => ({ compute: list.map(() => next++), comm: [] as number[] }));
  const { schedule: name, ranks, stages, microBatches, stageRank } = order;
  const graph: LoweredSchedule = { name, ranks, stages, microBatches, stageRank, actions, streams };
  return (compute, transfer) => {
    const seconds = flat.actions.map(compute);
    const latency = transfers.map(transfer);
    // A cross-rank dep is the producer of one of the consumer's (at most two) incoming transfers.
    const delay = (id: number, dep: number): number => {
      for (const d of inputs[id]!) if (d < 0 && transfers[~d]!.producer === dep) return latency[~d]!;
      return 0;
    };
    return execute(graph, (a) => seconds[a.id]!, delay).end;
  };
}
