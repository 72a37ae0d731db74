// 1F1B (PipeDream-flush) order: warm-up forwards, then one forward one backward, then the remaining backwards.
import { computeAction, type Action } from "../action.js";
import { assertCount, identityPlacement, type ComputeOrder, type OrderOptions } from "./order.js";

/**
 * Rank s runs min(p − s − 1, m) warm-up forwards, then alternates F(next) and B(oldest) until the forwards
 * run out, then drains the backwards. At most p − s micro-batches are in flight on stage s (GPipe: all m),
 * and the bubble is the same as GPipe's.
 */
export function oneFOneBOrder(opts: OrderOptions): ComputeOrder {
  const { ranks: p, microBatches: m } = opts;
  assertCount("ranks", p);
  assertCount("microBatches", m);
  const perRank: Action[][] = [];
  for (let s = 0; s < p; s++) {
    const list: Action[] = [];
    const warmup = Math.min(p - s - 1, m);
    let f = 0;
    for (; f < warmup; f++) list.push(computeAction("F", s, f));
    for (let b = 0; b < m; b++) {
      if (f < m) list.push(computeAction("F", s, f++));
      list.push(computeAction("B", s, b));
    }
    perRank.push(list);
  }
  return { schedule: "1f1b", ranks: p, stages: p, microBatches: m, stageRank: identityPlacement(p), perRank };
}
