// The compute order of a pipeline schedule: which stages each rank runs and its compute actions in order.
import type { Action } from "../action.js";

/** Same spellings as the `schedule` setting of a `.fsm` parallel section. */
export const SCHEDULE_NAMES = ["gpipe", "1f1b", "interleaved", "zero_bubble"] as const;
export type ScheduleName = (typeof SCHEDULE_NAMES)[number];

/** FairScale Pipe's checkpoint modes, same spellings as the `checkpoint` setting. */
export const CHECKPOINT_MODES = ["always", "except_last", "never"] as const;
export type CheckpointMode = (typeof CHECKPOINT_MODES)[number];

export interface ComputeOrder {
  readonly schedule: ScheduleName;
  readonly ranks: number;
  /** Number of (virtual) stages; ranks × virtual stages per rank. */
  readonly stages: number;
  readonly microBatches: number;
  /** stageRank[s]: the rank that runs stage s. */
  readonly stageRank: readonly number[];
  /** Per rank, its compute actions (F, B, I, W, R) in the order it runs them. */
  readonly perRank: readonly (readonly Action[])[];
}

export interface OrderOptions {
  /** Pipeline ranks p. */
  readonly ranks: number;
  /** Micro-batches m (FairScale's `chunks`). */
  readonly microBatches: number;
}

/** Orders are built by the planner from checked settings, so a bad count is a compiler bug: assert. */
export function assertCount(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`schedule: ${name} must be a positive integer, got ${n}`);
}

/** One stage per rank, stage s on rank s. */
export function identityPlacement(ranks: number): number[] {
  return Array.from({ length: ranks }, (_, s) => s);
}
