// Interleaved 1F1B order (Megatron-LM): v virtual stages per rank, stage k on rank k mod p.
import { computeAction, type Action } from "../action.js";
import { assertCount, type ComputeOrder, type OrderOptions } from "./order.js";

export interface InterleavedOptions extends OrderOptions {
  /** Virtual stages (model chunks) per rank, v ≥ 1. */
  readonly virtualStages: number;
}

/**
 * Megatron-LM's interleaved schedule, kept as Megatron defines it (including its requirement that m be a
 * multiple of p): rank r owns stages r, p + r, …, (v − 1)p + r. Its forwards walk the micro-batches in groups
 * of p — all v chunks of one group before the next group — and its backwards walk them the same way with
 * the chunks reversed. Rank r runs (p − r − 1)·2 + (v − 1)·p warm-up forwards, then alternates one forward
 * and one backward, then drains. Megatron runs every forward first when m = p, because its batched p2p
 * calls need it; lowering orders our transfers itself, so the formula applies there too (validated,
 * same bubble, fewer micro-batches in flight on the later ranks). With uniform stages the bubble shrinks by v:
 * each rank idles (p − 1)(T_F + T_B)/v, where T_F and T_B are a rank's whole forward and backward of one
 * micro-batch (v chunks), a fraction (p − 1)/(v·m + p − 1) of the step (tested for m ∈ {p, 2p, 4p}, v ≤ 4).
 */
export function interleavedOrder(opts: InterleavedOptions): ComputeOrder {
  const { ranks: p, microBatches: m, virtualStages: v } = opts;
  assertCount("ranks", p);
  assertCount("microBatches", m);
  assertCount("virtualStages", v);
  if (m % p !== 0) {
    throw new Error(
      `schedule: interleaved 1F1B needs the micro-batch count to be a multiple of the pipeline ranks, as in ` +
        `Megatron-LM (micro-batches are taken in groups of p); got m=${m}, p=${p}`,
    );
  }
  const total = m * v;
  // The i-th forward (or backward) of a rank: which chunk and which micro-batch.
  const chunkOf = (i: number, forward: boolean): number => {
    const c = Math.floor((i % (p * v)) / p);
    return forward ? c : v - 1 - c;
  };
  const mbOf = (i: number): number => Math.floor(i / (p * v)) * p + (i % p);

  const perRank: Action[][] = [];
  for (let r = 0; r < p; r++) {
    const fwd = (i: number): Action => computeAction("F", chunkOf(i, true) * p + r, mbOf(i));
    const bwd = (i: number): Action => computeAction("B", chunkOf(i, false) * p + r, mbOf(i));
    const warmup = Math.min((p - r - 1) * 2 + (v - 1) * p, total);
    const list: Action[] = [];
    for (let i = 0; i < warmup; i++) list.push(fwd(i));
    for (let i = 0; i < total - warmup; i++) list.push(fwd(warmup + i), bwd(i));
    for (let i = total - warmup; i < total; i++) list.push(bwd(i));
    perRank.push(list);
  }
  const stageRank = Array.from({ length: p * v }, (_, k) => k % p);
  return { schedule: "interleaved", ranks: p, stages: p * v, microBatches: m, stageRank, perRank };
}
