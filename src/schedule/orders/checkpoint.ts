// Activation checkpointing as FairScale Pipe defines its modes: which micro-batches recompute their forward.
import { computeAction, type Action } from "../action.js";
import type { CheckpointMode, ComputeOrder } from "./order.js";

/**
 * FairScale's `checkpoint_stop`: micro-batches below it are checkpointed — `always` m, `except_last` m − 1
 * (so nothing with one micro-batch), `never` 0. It applies to every stage alike.
 */
export function checkpointStop(mode: CheckpointMode, microBatches: number): number {
  switch (mode) {
    case "always":
      return microBatches;
    case "except_last":
      return microBatches - 1;
    case "never":
      return 0;
  }
}

/**
 * Inserts R(s, mb) right before the first backward action (B, or I when split) of every checkpointed
 * micro-batch. The forward then keeps only its stage input, and R rebuilds the activations just in time, so
 * a checkpointed micro-batch holds full activations only from R to its backward. Unlike FairScale, where
 * recompute runs inside the backward once the gradient has arrived, R here needs only its own forward, so
 * it runs while its rank waits for the gradient and leaves the bubble unchanged.
 */
export function withCheckpointing(order: ComputeOrder, mode: CheckpointMode): ComputeOrder {
  const stop = checkpointStop(mode, order.microBatches);
  if (stop === 0) return order;
  const perRank = order.perRank.map((list) => {
    const out: Action[] = [];
    for (const a of list) {
      if ((a.kind === "B" || a.kind === "I") && a.mb! < stop) out.push(computeAction("R", a.stage, a.mb!));
      out.push(a);
    }
    return out;
  });
  return { ...order, perRank };
}
