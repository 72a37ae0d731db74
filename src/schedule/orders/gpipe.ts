// GPipe fill-drain order: every forward in FairScale Pipe's clock-cycle order, then every backward reversed.
import { computeAction, type Action } from "../action.js";
import { assertCount, identityPlacement, type ComputeOrder, type OrderOptions } from "./order.js";

/**
 * FairScale Pipe's `_clock_cycles(m, n)`: at clock k, partition j runs micro-batch k − j, so the pairs
 * (micro-batch, partition) of clock k are those with 0 ≤ k − j < m; m + n − 1 clocks in all.
 */
export function clockCycles(microBatches: number, partitions: number): [mb: number, partition: number][][] {
  const clocks: [number, number][][] = [];
  for (let k = 0; k < microBatches + partitions - 1; k++) {
    const tick: [number, number][] = [];
    for (let j = Math.max(1 + k - microBatches, 0); j < Math.min(1 + k, partitions); j++) tick.push([k - j, j]);
    clocks.push(tick);
  }
  return clocks;
}

export function gpipeOrder(opts: OrderOptions): ComputeOrder {
  const { ranks: p, microBatches: m } = opts;
  assertCount("ranks", p);
  assertCount("microBatches", m);
  const perRank: Action[][] = Array.from({ length: p }, () => []);
  const clocks = clockCycles(m, p);
  for (const tick of clocks) for (const [mb, j] of tick) perRank[j]!.push(computeAction("F", j, mb));
  // Pipe leaves the backward to autograd, which walks the clocks backwards: the last micro-batch first.
  for (let k = clocks.length - 1; k >= 0; k--) {
    const tick = clocks[k]!;
    for (let t = tick.length - 1; t >= 0; t--) {
      const [mb, j] = tick[t]!;
      perRank[j]!.push(computeAction("B", j, mb));
    }
  }
  return { schedule: "gpipe", ranks: p, stages: p, microBatches: m, stageRank: identityPlacement(p), perRank };
}
