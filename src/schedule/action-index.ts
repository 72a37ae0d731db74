// A per-rank index of compute and p2p actions by their fields, with numeric keys (no strings on hot paths).
import { COMPUTE_KINDS, P2P_KINDS, type Action, type ActionKind, type ComputeKind } from "./action.js";
import type { Has, Ref } from "./rules.js";

// A plain object: property lookups by kind beat a Map on this path.
const KIND_CODE: Readonly<Record<string, number>> = Object.fromEntries([...COMPUTE_KINDS, ...P2P_KINDS].map((k, i) => [k, i] as const));
const KINDS = COMPUTE_KINDS.length + P2P_KINDS.length;
/** Most dense slots (12 bytes each); p = 32, v = 4, m = 256 needs 295k. */
const MAX_DENSE = 1 << 22;

export interface IndexShape {
  readonly ranks: number;
  readonly stages: number;
  readonly microBatches: number;
}

/**
 * Only actions inside the pipeline (stage, micro-batch and peer in range; compute or p2p kind) are
 * indexed; validation reports the others. `add` keeps the first of two equal actions on a rank.
 *
 * In a well-formed schedule each (kind, stage, micro-batch) occurs once, on one rank with one peer, so a
 * dense table over (kind, stage, micro-batch) answers almost every lookup; its size is a small multiple of
 * the action count (every stage runs every micro-batch). The same (kind, stage, micro-batch) on a second
 * rank or with a second peer (broken schedules only) goes to a per-rank map. Large schedules add and look up
 * hundreds of thousands of actions, and Maps of that size were most of lowering's time and garbage. A shape
 * too large for the table (beyond any real pipeline, or a damaged schedule's counts) uses the maps alone.
 */
export class ActionIndex {
  /** id + 1 of the first action added under a dense key (0: none), and its rank and peer + 1 (0: none). */
  private readonly ids: Int32Array;
  private readonly ranksOf: Int32Array;
  private readonly peersOf: Int32Array;
  private readonly dense: boolean;
  private overflow: Map<number, number>[] | undefined;

  constructor(private readonly shape: IndexShape) {
    const slots = shape.microBatches * shape.stages * KINDS;
    this.dense = slots > 0 && slots <= MAX_DENSE;
    const size = this.dense ? slots : 0;
    this.ids = new Int32Array(size);
    this.ranksOf = new Int32Array(size);
    this.peersOf = new Int32Array(size);
  }

  /** The dense key of (kind, stage, mb), or -1 when the action cannot be indexed. */
  private key(kind: ActionKind, stage: number, mb: number | undefined, peer: number | undefined): number {
    const k = KIND_CODE[kind];
    const { ranks, stages, microBatches } = this.shape;
    if (k === undefined || mb === undefined || !(stage >= 0 && stage < stages && mb >= 0 && mb < microBatches)) return -1;
    if (peer !== undefined && !(peer >= 0 && peer < ranks)) return -1;
    return (mb * stages + stage) * KINDS + k;
  }

  private overflowMap(rank: number): Map<number, number> {
    this.overflow ??= Array.from({ length: this.shape.ranks }, () => new Map<number, number>());
    return this.overflow[rank]!;
  }

  private static slot(key: number, peer: number | undefined, ranks: number): number {
    return key * (ranks + 1) + (peer === undefined ? 0 : peer + 1);
  }

  /** False when the rank already holds an equal action (or the action cannot be indexed). */
  add(rank: number, a: Action, id: number): boolean {
    if (!(rank >= 0 && rank < this.shape.ranks)) return false;
    const key = this.key(a.kind, a.stage, a.mb, a.peer);
    if (key < 0) return false;
    const p = a.peer === undefined ? 0 : a.peer + 1;
    if (this.dense) {
      if (this.ids[key] === 0) {
        this.ids[key] = id + 1;
        this.ranksOf[key] = rank;
        this.peersOf[key] = p;
        return true;
      }
      if (this.ranksOf[key] === rank && this.peersOf[key] === p) return false;
    }
    const map = this.overflowMap(rank);
    const slot = ActionIndex.slot(key, a.peer, this.shape.ranks);
    if (map.has(slot)) return false;
    map.set(slot, id);
    return true;
  }

  find(rank: number, kind: ActionKind, stage: number, mb: number, peer?: number): number | undefined {
    const key = this.key(kind, stage, mb, peer);
    if (key < 0) return undefined;
    const id = this.dense ? this.ids[key]! : 0;
    if (id !== 0 && this.ranksOf[key] === rank && this.peersOf[key] === (peer === undefined ? 0 : peer + 1)) return id - 1;
    return this.overflow?.[rank]?.get(ActionIndex.slot(key, peer, this.shape.ranks));
  }

  findRef(r: Ref): number | undefined {
    return this.find(r.rank, r.kind, r.stage, r.mb, r.peer);
  }

  findAction(rank: number, a: Action): number | undefined {
    return this.find(rank, a.kind, a.stage, a.mb!, a.peer);
  }

  readonly has: Has = (rank: number, kind: ComputeKind, stage: number, mb: number): boolean => this.find(rank, kind, stage, mb) !== undefined;
}
