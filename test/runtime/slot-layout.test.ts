// The step program's arena layout: values live at the same time never share bytes, pinned slots keep theirs
// for the whole run, and reuse brings the arena near the most bytes ever live at once.
import { describe, expect, it } from "vitest";
import { layoutSlots, type SlotNeed } from "../../src/runtime/slot-layout.js";
import { rng } from "../support/prng.js";

const aligned = (n: number) => Math.ceil(n / 64) * 64;

function check(needs: readonly SlotNeed[]): { arena: number; peak: number } {
  const { offsets, arenaBytes } = layoutSlots(needs);
  needs.forEach((a, i) => {
    expect(offsets[i]! % 64).toBe(0);
    expect(offsets[i]! + a.bytes).toBeLessThanOrEqual(arenaBytes);
    needs.forEach((b, j) => {
      if (j <= i) return;
      const together = a.from <= b.to && b.from <= a.to;
      const shared = offsets[i]! < offsets[j]! + aligned(b.bytes) && offsets[j]! < offsets[i]! + aligned(a.bytes);
      expect(together && shared, `slots ${i} [${a.from}, ${a.to}] and ${j} [${b.from}, ${b.to}] share bytes`).toBe(false);
    });
  });
  // The most bytes live at one instruction: no layout can do better.
  const points = [...new Set(needs.flatMap((n) => [n.from, n.to]).filter(Number.isFinite))];
  const peak = Math.max(...points.map((t) => needs.filter((n) => n.from <= t && t <= n.to).reduce((s, n) => s + aligned(n.bytes), 0)));
  expect(arenaBytes).toBeGreaterThanOrEqual(peak);
  return { arena: arenaBytes, peak };
}

describe("layoutSlots", () => {
  it("a chain of values each read by the next reuses two buffers", () => {
    const needs = Array.from({ length: 10 }, (_, i) => ({ bytes: 1000, from: i, to: i + 1 }));
    expect(check(needs).arena).toBe(2 * aligned(1000));
  });

  it("pinned slots are never shared", () => {
    const needs = [
      { bytes: 100, from: -1, to: Infinity },
      { bytes: 100, from: 0, to: 0 },
      { bytes: 100, from: 1, to: 1 },
      { bytes: 100, from: -1, to: Infinity },
    ];
    const { offsets } = layoutSlots(needs);
    expect(new Set([offsets[0], offsets[3]]).size).toBe(2);
    expect(offsets[1]).toBe(offsets[2]);
    check(needs);
  });

  it("random lifetimes: never overlapping while live, within 1.5× of the live peak on average", () => {
    const next = rng(17);
    let ratio = 0;
    const cases = 200;
    for (let c = 0; c < cases; c++) {
      const n = 2 + Math.floor(next() * 30);
      const needs = Array.from({ length: n }, () => {
        const from = Math.floor(next() * 40);
        return { bytes: 1 + Math.floor(next() * 5000), from, to: from + Math.floor(next() * 10) };
      });
      const { arena, peak } = check(needs);
      ratio += arena / peak;
    }
    expect(ratio / cases).toBeLessThan(1.5);
  });
});
