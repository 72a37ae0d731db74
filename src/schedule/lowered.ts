// The lowered schedule: every rank's actions on its two streams, with explicit dependencies and p2p pairs.
import { formatAction, type Action } from "./action.js";

export const STREAMS = ["compute", "comm"] as const;
export type StreamName = (typeof STREAMS)[number];

/**
 * Execution semantics (shared by validation, simulation and the runtime):
 * - a stream runs its actions one at a time, in list order;
 * - an action starts once its stream is free and every action in `deps` (on any rank) has finished;
 * - a SEND and its RECV (`match`) form a rendezvous: they start together, once each is at the front of its
 *   comm stream with its deps done, and occupy both comm streams for the transfer time. A schedule that is
 *   deadlock-free under this strictest reading also runs with buffered or asynchronous sends.
 */
export interface LoweredAction {
  /** Index into `LoweredSchedule.actions`. */
  readonly id: number;
  readonly rank: number;
  readonly stream: StreamName;
  readonly action: Action;
  /** Ids of the actions that must finish before this one starts. */
  readonly deps: readonly number[];
  /** P2P actions: id of the matching action on the peer rank. */
  readonly match?: number;
}

export interface RankStreams {
  readonly compute: readonly number[];
  readonly comm: readonly number[];
}

/** Where the stages sit: what lowering, validation and wiring need besides the actions. */
export interface ScheduleShape {
  /** Where it came from ("1f1b", "interleaved", a test name…), for messages. */
  readonly name: string;
  readonly ranks: number;
  readonly stages: number;
  readonly microBatches: number;
  /** stageRank[s]: the rank that runs stage s. */
  readonly stageRank: readonly number[];
}

export interface LoweredSchedule extends ScheduleShape {
  readonly actions: readonly LoweredAction[];
  /** Per rank, action ids in stream order. */
  readonly streams: readonly RankStreams[];
}

/** `rank 2 2SEND_F3@3`: how messages name an action. */
export function actionLabel(s: LoweredSchedule, id: number): string {
  const a = s.actions[id];
  return a ? `rank ${a.rank} ${formatAction(a.action)}` : `action #${id} (no such action)`;
}
