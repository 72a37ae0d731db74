// Lowering: a compute order becomes per-rank compute and comm streams with SEND/RECV pairs and explicit deps.
import { ActionIndex } from "./action-index.js";
import { formatAction, isComputeKind, type Action } from "./action.js";
import { computeSeconds, type ScheduleCosts } from "./costs.js";
import { execute } from "./execute.js";
import type { LoweredAction, LoweredSchedule } from "./lowered.js";
import type { ComputeOrder } from "./orders/order.js";
import { dataProducers, recvFor, refAction, sendFor, type Ref } from "./rules.js";
import { wire, type StreamActions } from "./wire.js";

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
  const { index, flat } = indexOrder(order);
  const transfers: Transfer[] = [];
  // Per compute action (by id): its same-rank producers and its incoming transfers.
  const localDeps: number[][] = flat.map(() => []);
  const incoming: number[][] = flat.map(() => []);
  flat.forEach(({ rank, action }, id) => {
    for (const p of dataProducers(action, rank, order, index.has)) {
      const d = index.findRef(p);
      if (d === undefined) throw new Error(`lower: ${formatAction(action)} on rank ${rank} reads ${formatAction(refAction(p))}, which the order lacks`);
      if (p.rank === rank) localDeps[id]!.push(d);
      else {
        incoming[id]!.push(transfers.length);
        transfers.push({ producer: d, from: p, toRank: rank, toStage: action.stage, ready: Infinity, step: Infinity });
      }
    }
  });

  const reference = referenceRun(order, flat, localDeps, incoming, transfers);
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
  const perRank: StreamActions[] = order.perRank.map((compute, rank) => ({
    compute,
    comm: comm[rank]!.sort(byKey).map((t) => refAction(t.from.rank === rank ? sendFor(t.from, t.toRank) : recvFor(t.from, t.toRank, t.toStage))),
  }));
  const { schedule: name, ranks, stages, microBatches, stageRank } = order;
  return wire({ name, ranks, stages, microBatches, stageRank }, perRank);
}

/** The order's compute actions numbered rank by rank; the order must be well formed (it is generated). */
function indexOrder(order: ComputeOrder): { index: ActionIndex; flat: { rank: number; action: Action }[] } {
  const index = new ActionIndex(order);
  const flat: { rank: number; action: Action }[] = [];
  order.perRank.forEach((list, rank) => {
    for (const action of list) {
      const fail = (why: string): never => {
        throw new Error(`lower: ${formatAction(action)} on rank ${rank} ${why}`);
      };
      if (!isComputeKind(action.kind)) fail("is not a compute action");
      if (order.stageRank[action.stage] !== rank) fail(`is not where stage ${action.stage} is placed`);
      if (!index.add(rank, action, flat.length)) fail("is repeated or outside the pipeline");
      flat.push({ rank, action });
    }
  });
  return { index, flat };
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
  flat: readonly { rank: number; action: Action }[],
  localDeps: readonly number[][],
  incoming: readonly number[][],
  transfers: readonly Transfer[],
): (compute: (a: Action) => number, transfer: (t: Transfer) => number) => Float64Array {
  const actions: LoweredAction[] = flat.map(({ rank, action }, id) => ({
    id,
    rank,
    stream: "compute",
    action,
    deps: incoming[id]!.length === 0 ? localDeps[id]! : [...localDeps[id]!, ...incoming[id]!.map((t) => transfers[t]!.producer)],
  }));
  let next = 0;
  const streams = order.perRank.map((list) => ({ compute: list.map(() => next++), comm: [] as number[] }));
  const { schedule: name, ranks, stages, microBatches, stageRank } = order;
  const graph: LoweredSchedule = { name, ranks, stages, microBatches, stageRank, actions, streams };
  return (compute, transfer) => {
    const seconds = flat.map(({ action }) => compute(action));
    const latency = transfers.map(transfer);
    // A cross-rank dep is the producer of one of the consumer's (at most two) incoming transfers.
    const delay = (id: number, dep: number): number => {
      for (const t of incoming[id]!) if (transfers[t]!.producer === dep) return latency[t]!;
      return 0;
    };
    return execute(graph, (a) => seconds[a.id]!, delay).end;
  };
}
