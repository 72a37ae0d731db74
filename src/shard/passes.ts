// Compute orders of one stage for the overlap model: which forward/backward passes run, in which order.
import type { ComputeKind } from "../schedule/action.js";

/** One compute action of the stage (e.g. a rank's `1F3`), optionally not startable before `readyAt`
 *  seconds (when its input arrives from the previous stage). */
export interface ComputePass {
  readonly kind: ComputeKind;
  readonly mb: number;
  readonly readyAt?: number;
}

/** Plain gradient accumulation on a stage of its own: F0 B0 F1 B1 ... */
export function accumulationPasses(microBatches: number): ComputePass[] {
  checkCount(microBatches);
  return Array.from({ length: microBatches }, (_, mb) => [{ kind: "F", mb } as const, { kind: "B", mb } as const]).flat();
}

/** Fill-drain (GPipe) on one stage: every forward, then the backwards in reverse: F0 ... Fm−1 Bm−1 ... B0. */
export function fillDrainPasses(microBatches: number): ComputePass[] {
  checkCount(microBatches);
  const f = Array.from({ length: microBatches }, (_, mb) => ({ kind: "F", mb }) as const);
  const b = Array.from({ length: microBatches }, (_, i) => ({ kind: "B", mb: microBatches - 1 - i }) as const);
  return [...f, ...b];
}

function checkCount(m: number): void {
  if (!Number.isInteger(m) || m < 1) throw new Error(`internal: micro-batch count must be a positive integer, got ${m}`);
}
