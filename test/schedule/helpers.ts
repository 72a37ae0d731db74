// Shared helpers for schedule tests: the test grid, order listings, and per-(stage, mb) counts.
import { formatAction } from "../../src/schedule/action.js";
import type { ScheduleSpec } from "../../src/schedule/orders/build.js";
import type { CheckpointMode, ComputeOrder } from "../../src/schedule/orders/order.js";

/** Each rank's compute order as one line of action text. */
export function orderLines(order: ComputeOrder): string[] {
  return order.perRank.map((list, r) => `r${r}: ${list.map(formatAction).join(" ")}`);
}

/** How often each `kind stage mb` occurs, keyed by action text, with the rank that holds it. */
export function census(order: ComputeOrder): Map<string, { count: number; ranks: Set<number> }> {
  const out = new Map<string, { count: number; ranks: Set<number> }>();
  order.perRank.forEach((list, rank) => {
    for (const a of list) {
      const t = formatAction(a);
      const e = out.get(t) ?? { count: 0, ranks: new Set<number>() };
      e.count++;
      e.ranks.add(rank);
      out.set(t, e);
    }
  });
  return out;
}

/**
 * A representative grid over p ≤ 32, m ≤ 8p, v ≤ 4, sized to validate in a few seconds: every m for
 * p ≤ 6; for larger p the shapes where schedules change character (m = 1, m = p ± 1, m = p, m > 2p); and
 * the largest corners (p = 32 with m = 8p, v = 4 with m = 8p; bench/schedule.ts runs every schedule there). Interleaved takes m in multiples of p (its
 * documented requirement). Checkpoint modes rotate through the grid so R shows up everywhere.
 */
export function scheduleGrid(): ScheduleSpec[] {
  const specs: ScheduleSpec[] = [];
  const modes: CheckpointMode[] = ["never", "always", "except_last"];
  const add = (spec: ScheduleSpec): void => void specs.push({ ...spec, checkpoint: modes[specs.length % modes.length]! });
  const single = ["gpipe", "1f1b", "zero_bubble"] as const;
  for (const p of [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 31, 32]) {
    const ms = p <= 6 ? range(1, 8 * p) : [1, p - 1, p, p + 1, 2 * p + 3];
    for (const m of ms) for (const schedule of single) add({ schedule, ranks: p, microBatches: m });
    // Interleaved: m = p, 2p, 3p and 8p with every v for small p; for larger p a few (m, v) pairs.
    const pairs = p <= 6 ? [1, 2, 3, 8].flatMap((k) => [1, 2, 3, 4].map((v) => [k, v] as const)) : p <= 16 ? ([[1, 1], [1, 4], [2, 2], [2, 3]] as const) : ([[1, 4], [2, 2]] as const);
    for (const [k, v] of pairs) add({ schedule: "interleaved", ranks: p, microBatches: k * p, virtualStages: v });
  }
  add({ schedule: "1f1b", ranks: 32, microBatches: 256 });
  add({ schedule: "zero_bubble", ranks: 16, microBatches: 128 });
  add({ schedule: "interleaved", ranks: 8, microBatches: 64, virtualStages: 4 });
  return specs;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}
