// Wiring: turns per-rank stream lists of actions into a LoweredSchedule with explicit deps and p2p matches.
import { ActionIndex } from "./action-index.js";
import { isP2PKind, type Action } from "./action.js";
import type { LoweredAction, LoweredSchedule, ScheduleShape, StreamName } from "./lowered.js";
import { counterpart, localInputs } from "./rules.js";

export interface StreamActions {
  readonly compute: readonly Action[];
  readonly comm: readonly Action[];
}

/**
 * Ids are assigned rank by rank, compute stream before comm stream. Every dependency the data-flow rules
 * require (rules.ts) becomes an explicit edge when the action it names exists on that rank; what cannot be
 * wired (a missing RECV, an action outside the pipeline) is left for validation to report, so a broken
 * hand-written schedule still lowers and gets a picture instead of an exception.
 */
export function wire(shape: ScheduleShape, perRank: readonly StreamActions[]): LoweredSchedule {
  const index = new ActionIndex(shape);
  const ranks: number[] = [];
  const kinds: StreamName[] = [];
  const list: Action[] = [];
  // Whether the action is inside the pipeline (the index took it, or an equal one): only those get wired,
  // since the rules assume it.
  const indexed: boolean[] = [];
  const streams = perRank.map((lists, rank) => {
    const ids = (stream: StreamName, actions: readonly Action[]): number[] =>
      actions.map((action) => {
        const id = list.length;
        ranks.push(rank);
        kinds.push(stream);
        list.push(action);
        indexed.push(index.add(rank, action, id) || index.findAction(rank, action) !== undefined);
        return id;
      });
    return { compute: ids("compute", lists.compute), comm: ids("comm", lists.comm) };
  });

  const actions: LoweredAction[] = list.map((action, id) => {
    const rank = ranks[id]!;
    const stream = kinds[id]!;
    const deps: number[] = [];
    if (!indexed[id]) return Object.freeze({ id, rank, stream, action, deps });
    for (const need of localInputs(action, rank, shape, index.has)) {
      const d = index.findRef(need);
      if (d !== undefined) deps.push(d);
    }
    const other = isP2PKind(action.kind) ? counterpart(action, rank) : undefined;
    const match = other && index.findRef(other);
    return Object.freeze(match === undefined ? { id, rank, stream, action, deps } : { id, rank, stream, action, deps, match });
  });
  const { name, ranks: rankCount, stages, microBatches, stageRank } = shape;
  return { name, ranks: rankCount, stages, microBatches, stageRank, actions, streams };
}
