// The step program's arena layout: values live at the same time never share bytes, pinned slots keep theirs
// for the whole run, and reuse brings the arena near the most bytes ever live at once.
import { describe, expect, it } from "vitest";
import { greedyBySize, layoutSlots, sweepBestFit, type SlotLayout, type SlotNeed } from "../../src/lower/slot-layout.js";
import { rng } from "../support/prng.js";

const aligned = (n: number) => Math.ceil(n / 64) * 64;

function check(needs: readonly SlotNeed[], layout: (n: readonly SlotNeed[]) => SlotLayout = layoutSlots): { arena: number; peak: number } {
  const { offsets, arenaBytes } = layout(needs);
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

  for (const [name, layout, bound] of [
    ["both heuristics, the better kept", layoutSlots, 1.12],
    ["the sweep with best fit alone", sweepBestFit, 1.5],
    ["greedy by size alone", greedyBySize, 1.15],
  ] as const) {
    it(`random lifetimes, ${name}: never overlapping while live, within ${bound}× of the live peak on average`, () => {
      const next = rng(17);
      let ratio = 0;
      const cases = 200;
      for (let c = 0; c < cases; c++) {
        const n = 2 + Math.floor(next() * 30);
        const needs = Array.from({ length: n }, () => {
          const from = Math.floor(next() * 40);
          return { bytes: 1 + Math.floor(next() * 5000), from, to: from + Math.floor(next() * 10) };
        });
        const { arena, peak } = check(needs, layout);
        ratio += arena / peak;
      }
      expect(ratio / cases).toBeLessThan(bound);
    });
  }

  it("greedy by size packs the slots alive throughout at the bottom, largest first, and places the rest above them", () => {
    const r = rng(11);
    const pinned = Array.from({ length: 40 }, () => ({ bytes: 64 * (1 + Math.floor(r() * 50)), from: -2, to: Infinity }));
    const values = Array.from({ length: 200 }, () => {
      const from = Math.floor(r() * 300);
      return { bytes: 64 * (1 + Math.floor(r() * 200)), from, to: from + Math.floor(r() * 30) };
    });
    const needs = [...values.slice(0, 100), ...pinned, ...values.slice(100)];
    check(needs, greedyBySize);
    const { offsets } = greedyBySize(needs);
    const bottom = pinned.reduce((n, p) => n + p.bytes, 0);
    const order = pinned.map((_, i) => 100 + i).sort((a, b) => needs[b]!.bytes - needs[a]!.bytes || a - b);
    let at = 0;
    for (const i of order) {
      expect(offsets[i]).toBe(at);
      at += needs[i]!.bytes;
    }
    for (let i = 0; i < needs.length; i++) if (needs[i]!.to !== Infinity) expect(offsets[i]!).toBeGreaterThanOrEqual(bottom);
  });

  it("a large value born after small ones died in a scattered pattern: greedy by size packs it at the live peak", () => {
    // Small values alternate between short and long lives, so the sweep's free space is fragmented when the
    // large value arrives; placed first by size, the large value takes offset 0 and the small ones fit around.
    const small = Array.from({ length: 8 }, (_, i) => ({ bytes: 1024, from: 0, to: i % 2 === 0 ? 1 : 10 }));
    const needs = [...small, { bytes: 4 * 1024, from: 2, to: 5 }];
    const sweep = check(needs, sweepBestFit);
    const greedy = check(needs, greedyBySize);
    expect(greedy.arena).toBe(greedy.peak);
    expect(sweep.arena).toBeGreaterThan(greedy.arena);
    expect(layoutSlots(needs).arenaBytes).toBe(greedy.arena);
  });

  it("greedy by size places each slot at the lowest offset clear of the placed slots alive with it, as a plain scan does", () => {
    // The definition, slot by slot (quadratic): the index over time with merged byte runs must agree exactly,
    // with lifetimes on half positions (comm instructions), pinned, empty and open-ended slots mixed in.
    const next = rng(23);
    for (let c = 0; c < 150; c++) {
      const n = 1 + Math.floor(next() * (c % 10 === 0 ? 400 : 40));
      const span = 1 + Math.floor(next() * 60);
      const needs: SlotNeed[] = Array.from({ length: n }, () => {
        const r = next();
        if (r < 0.1) return { bytes: Math.floor(next() * 3000), from: -2, to: Infinity };
        if (r < 0.15) return { bytes: 0, from: 0, to: 0 };
        const from = Math.floor(next() * span) + (next() < 0.3 ? 0.5 : 0);
        const to = next() < 0.05 ? Infinity : from + Math.floor(next() * (next() < 0.2 ? span : 5));
        return { bytes: next() < 0.05 ? 0 : 1 + Math.floor(next() * (next() < 0.5 ? 200 : 9000)), from, to };
      });
      expect(greedyBySize(needs)).toEqual(greedyByScan(needs));
    }
  });
});

/** greedyBySize by its definition: largest first (ties by start, then index); the slots alive throughout
 *  packed at the bottom; each other slot at the lowest offset above them clear of every placed slot it is
 *  alive with, found by scanning those in offset order. */
function greedyByScan(needs: readonly SlotNeed[]): SlotLayout {
  const size = needs.map((x) => aligned(x.bytes));
  const order = needs.map((_, i) => i).sort((a, b) => size[b]! - size[a]! || needs[a]!.from - needs[b]!.from || a - b);
  const throughout = (i: number) => needs[i]!.to === Infinity && needs[i]!.from < 0;
  const offsets = needs.map(() => 0);
  let base = 0;
  for (const i of order.filter(throughout)) {
    offsets[i] = base;
    base += size[i]!;
  }
  const placed: number[] = [];
  let arenaBytes = base;
  for (const i of order) {
    if (size[i] === 0 || throughout(i)) continue;
    const clash = placed.filter((p) => needs[p]!.from <= needs[i]!.to && needs[i]!.from <= needs[p]!.to).sort((a, b) => offsets[a]! - offsets[b]!);
    let offset = base;
    for (const p of clash) {
      if (offsets[p]! >= offset + size[i]!) break;
      offset = Math.max(offset, offsets[p]! + size[p]!);
    }
    offsets[i] = offset;
    placed.push(i);
    arenaBytes = Math.max(arenaBytes, offset + size[i]!);
  }
  return { offsets, arenaBytes };
}
