// Data-flow rules of a pipeline: what each action reads, and which SEND pairs with which RECV.
import { formatAction, makeAction, type Action, type ActionKind, type ComputeKind } from "./action.js";

export interface Placement {
  readonly stages: number;
  readonly stageRank: readonly number[];
}

/** Whether `rank` holds this compute action; tells a checkpointed (R) or a split (I/W) backward. */
export type Has = (rank: number, kind: ComputeKind, stage: number, mb: number) => boolean;

/**
 * An action named by its fields and its rank: what rules return, so that callers look it up in their own
 * index without building (and freezing) an Action first.
 */
export interface Ref {
  readonly rank: number;
  readonly kind: ActionKind;
  readonly stage: number;
  readonly mb: number;
  readonly peer?: number;
}

export function refAction(r: Ref): Action {
  return makeAction(r.peer === undefined ? { kind: r.kind, stage: r.stage, mb: r.mb } : { kind: r.kind, stage: r.stage, mb: r.mb, peer: r.peer });
}

export function refText(r: Ref): string {
  return formatAction(r.peer === undefined ? { kind: r.kind, stage: r.stage, mb: r.mb } : r);
}

/** The backward action that carries (stage, mb)'s input gradient: I when the backward is split, else B. */
function backwardKind(rank: number, stage: number, mb: number, has: Has): ComputeKind {
  return has(rank, "I", stage, mb) ? "I" : "B";
}

/**
 * The compute actions, wherever they run, whose results a compute action reads: a forward reads the
 * previous stage's forward; R re-runs its forward from the stashed input; a backward (B or I) reads its
 * own stash (R's when checkpointed, else F's) and the next stage's input gradient; W reads its I.
 */
export function dataProducers(a: Action, rank: number, pl: Placement, has: Has): Ref[] {
  const s = a.stage;
  const mb = a.mb!;
  switch (a.kind) {
    case "F":
      return s > 0 ? [{ rank: pl.stageRank[s - 1]!, kind: "F", stage: s - 1, mb }] : [];
    case "R":
      return [{ rank, kind: "F", stage: s, mb }];
    case "B":
    case "I": {
      const out: Ref[] = [{ rank, kind: has(rank, "R", s, mb) ? "R" : "F", stage: s, mb }];
      if (s + 1 < pl.stages) {
        const q = pl.stageRank[s + 1]!;
        out.push({ rank: q, kind: backwardKind(q, s + 1, mb, has), stage: s + 1, mb });
      }
      return out;
    }
    case "W":
      return [{ rank, kind: "I", stage: s, mb }];
    default:
      throw new Error(`dataProducers: ${a.kind} is not a compute action`);
  }
}

/** The RECV through which `consumerRank`, running `consumerStage`, gets a producer's result. */
export function recvFor(producer: Ref, consumerRank: number, consumerStage: number): Ref {
  return { rank: consumerRank, kind: producer.kind === "F" ? "RECV_F" : "RECV_B", stage: consumerStage, mb: producer.mb, peer: producer.rank };
}

/** The SEND with which the producer's rank ships its result to `consumerRank`. */
export function sendFor(producer: Ref, consumerRank: number): Ref {
  return { rank: producer.rank, kind: producer.kind === "F" ? "SEND_F" : "SEND_B", stage: producer.stage, mb: producer.mb, peer: consumerRank };
}

/**
 * The same-rank actions an action must wait for: its data producers, with producers on other ranks replaced
 * by the RECV that brings their result; a SEND waits for the compute action whose result it ships; a RECV
 * waits for nothing local (it pairs with its SEND instead). Shard actions bring their own dependencies.
 */
export function localInputs(a: Action, rank: number, pl: Placement, has: Has): Ref[] {
  switch (a.kind) {
    case "F":
    case "R":
    case "B":
    case "I":
    case "W":
      return dataProducers(a, rank, pl, has).map((p) => (p.rank === rank ? p : recvFor(p, rank, a.stage)));
    case "SEND_F":
      return [{ rank, kind: "F", stage: a.stage, mb: a.mb! }];
    case "SEND_B":
      return [{ rank, kind: backwardKind(rank, a.stage, a.mb!, has), stage: a.stage, mb: a.mb! }];
    default:
      return [];
  }
}

/** The other half of a p2p action: SEND_F(s)@q on rank r pairs with RECV_F(s+1)@r on rank q, and so on. */
export function counterpart(a: Action, rank: number): Ref | undefined {
  const mb = a.mb!;
  const q = a.peer!;
  switch (a.kind) {
    case "SEND_F":
      return { rank: q, kind: "RECV_F", stage: a.stage + 1, mb, peer: rank };
    case "RECV_F":
      return a.stage > 0 ? { rank: q, kind: "SEND_F", stage: a.stage - 1, mb, peer: rank } : undefined;
    case "SEND_B":
      return a.stage > 0 ? { rank: q, kind: "RECV_B", stage: a.stage - 1, mb, peer: rank } : undefined;
    case "RECV_B":
      return { rank: q, kind: "SEND_B", stage: a.stage + 1, mb, peer: rank };
    default:
      return undefined;
  }
}
