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
 * - a collective (ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE, BROADCAST, REDUCE) sits on the comm stream and
 *   involves the ranks of its `group`: like a p2p pair, its members start together, once every member has
 *   it at the front of its comm stream with its deps done, and occupy every member's comm stream for the
 *   collective's time (the longest any member's costs give). Members are matched by `collectiveKey`
 *   (collectives.ts): the action text without its stage, then the group, e.g. `ALL_REDUCE2u1 [0,1]` (members
 *   of a group that spans the pipeline run different stages; kind, micro-batch, unit and root must agree).
 *   The k-th collective with a given key on one member rank meets the k-th with that key on each other
 *   member, and every member must enter a group's collectives in the same order (NCCL matches calls on a
 *   communicator by position; validation reports any difference, or a member that never enters, with a
 *   picture). Members must also agree on `bytes` and `groupSize`.
 *   `group` holds only ranks of this simulated schedule. A collective among data-parallel replicas of one
 *   stage that are not simulated (every replica runs the same program as this rank, so they reach it
 *   together) has the group [this rank]: it takes its time on this rank's comm stream but waits for nobody.
 *   Its cost still counts the real communicator, `groupSize` ranks.
 * - OPTIMIZER (compute stream) and FREE (either stream; zero time, bookkeeping only) are local actions.
 *   A FREE releases the ALL_GATHER it depends on: the one dep that is an ALL_GATHER of the same stage and
 *   unit on the same rank (memory.ts counts the gathered bytes in between). An OPTIMIZER comes after every
 *   B, I and W of its stage in its compute stream and waits for the reductions of its stage on its rank
 *   (validate-shard.ts says exactly how).
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
  /** Collectives (required): the simulated ranks that take part, ascending, this rank among them. */
  readonly group?: readonly number[];
  /** Collectives: ranks of the whole communicator, replicas outside the simulation included (default group.length). */
  readonly groupSize?: number;
  /** Collectives (required): the full buffer as src/cost/collectives.ts counts it (gathered output, unreduced input). */
  readonly bytes?: number;
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
