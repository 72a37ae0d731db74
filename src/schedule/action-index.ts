// A per-rank index of compute and p2p actions by their fields, with numeric keys (no strings on hot paths).
import { COMPUTE_KINDS, P2P_KINDS, type Action, type ActionKind, type ComputeKind } from "./action.js";
import type { Has, Ref } from "./rules.js";

// A plain object: property lookups by kind beat a Map on this path.
const KIND_CODE: Readonly<Record<string, number>> = Object.fromEntries([...COMPUTE_KINDS, ...P2P_KINDS].map((k, i) => [k, i] as const));
const KINDS = COMPUTE_KINDS.length + P2P_KINDS.length;

export interface IndexShape {
  readonly ranks: number;
  readonly stages: number;
  readonly microBatches: number;
}

/**
 * Only actions inside the pipeline (stage, micro-batch and peer in range; compute or p2p kind) are
 * indexed; validation reports the others. `add` keeps the first of two equal actions on a rank.
 */
export class ActionIndex {
  private readonly maps: Map<number, number>[];

  constructor(private readonly shape: IndexShape) {
    this.maps = Array.from({ length: shape.ranks }, () => new Map());
  }

  private key(kind: ActionKind, stage: number, mb: number | undefined, peer: number | undefined): number | undefined {
    const k = KIND_CODE[kind];
    const { ranks, stages, microBatches } = this.shape;
    if (k === undefined || mb === undefined || !(stage >= 0 && stage < stages && mb >= 0 && mb < microBatches)) return undefined;
    if (peer !== undefined && !(peer >= 0 && peer < ranks)) return undefined;
    return ((mb * stages + stage) * KINDS + k) * (ranks + 1) + (peer === undefined ? 0 : peer + 1);
  }

  /** False when the rank already holds an equal action (or the action cannot be indexed). */
  add(rank: number, a: Action, id: number): boolean {
    const map = this.maps[rank];
    const key = this.key(a.kind, a.stage, a.mb, a.peer);
    if (!map || key === undefined || map.has(key)) return false;
    map.set(key, id);
    return true;
  }

  find(rank: number, kind: ActionKind, stage: number, mb: number, peer?: number): number | undefined {
    const key = this.key(kind, stage, mb, peer);
    return key === undefined ? undefined : this.maps[rank]?.get(key);
  }

  findRef(r: Ref): number | undefined {
    return this.find(r.rank, r.kind, r.stage, r.mb, r.peer);
  }

  findAction(rank: number, a: Action): number | undefined {
    return this.find(rank, a.kind, a.stage, a.mb!, a.peer);
  }

  readonly has: Has = (rank: number, kind: ComputeKind, stage: number, mb: number): boolean => this.find(rank, kind, stage, mb) !== undefined;
}
