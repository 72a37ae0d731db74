// ZB-H1 order (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): 1F1B with the backward split into I and W.
import { computeAction, type Action } from "../action.js";
import { oneFOneBOrder } from "./one-f-one-b.js";
import type { ComputeOrder, OrderOptions } from "./order.js";

/**
 * Rank s keeps 1F1B's warm-up (min(p − s − 1, m) forwards) and its F/I alternation, so at most p − s
 * micro-batches hold their full activations on stage s, exactly as 1F1B. Only the input-gradient half I is on
 * the critical path; the weight-gradient half W of micro-batch k runs right after the I of micro-batch k + s,
 * so at most s + 1 micro-batches hold what W needs at once on rank s. Those deferred W's fill the cool-down,
 * where 1F1B's bubble was: with T_W ≤ T_F and m ≥ p every rank idles exactly (p − 1)(T_F + T_I − T_W), a
 * third of 1F1B's (p − 1)(T_F + T_I + T_W) when T_F = T_I = T_W, as the paper states. With M_W ≤ M_B (what
 * W needs is part of the stash) rank s peaks at (p − s)·M_B + s·M_W ≤ p·M_B, 1F1B's peak on rank 0.
 */
export function zeroBubbleOrder(opts: OrderOptions): ComputeOrder {
  const base = oneFOneBOrder(opts);
  const m = opts.microBatches;
  // 1F1B runs its backwards in micro-batch order, so the k-th B is micro-batch k: split each into its I and
  // defer the matching W's.
  const perRank = base.perRank.map((list, s) => {
    const out: Action[] = [];
    let w = 0;
    let done = 0;
    for (const a of list) {
      if (a.kind !== "B") {
        out.push(a);
        continue;
      }
      out.push(computeAction("I", s, a.mb!));
      done++;
      // `done` I's have run: run the W's older than the last s of them.
      while (done - w > s) out.push(computeAction("W", s, w++));
    }
    while (w < m) out.push(computeAction("W", s, w++));
    return out;
  });
  return { ...base, schedule: "zero_bubble", perRank };
}
