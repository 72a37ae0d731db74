// The memory plan: model state per device against the ZeRO formulas, micro-batches in flight per schedule,
// arena layout sanity, and plans that do not fit rejected with a verified alternative.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { MemoryError } from "../../src/compile/fit.js";
import { modelStateBytes } from "../../src/cost/memory.js";
import { SHARD_STRATEGIES } from "../../src/check/settings-types.js";
import { compileSample, peakMicroBatchesInFlight, samplePath, sets } from "./helpers.js";

describe("model state per device", () => {
  for (const shard of SHARD_STRATEGIES) {
    it(`${shard}: every device holds the ZeRO formula's bytes, up to padding and partition imbalance`, () => {
      for (const [stages, dp] of [[1, 4], [2, 2]] as const) {
        const c = compileSample("mlp", "cpu", { stages, data_parallel: dp, chunks: 2, shard });
        const { precision, optimizer, reduceDtype } = c.settings;
        for (const plan of c.shards) {
          const psi = plan.params.reduce((n, p) => n + p.numel, 0);
          const formula = modelStateBytes(psi, dp, shard, precision, optimizer, reduceDtype);
          const held = plan.ranks.map((r) => c.plan.predicted.modelStateBytes[r]!);
          const bpe = plan.memory.shardedBytesPerElement;
          // The fullest rank pays exactly the formula plus the elements its shard holds beyond ⌈Ψ/N⌉.
          expect(Math.max(...held)).toBe(formula + bpe * plan.memory.excessElements);
          if (shard === "none") expect(held.every((h) => h === formula)).toBe(true);
          if (shard === "fsdp") expect(plan.memory.excessElements).toBeLessThanOrEqual(plan.units.length * (dp - 1));
          // Sharded state is conserved: the ranks' shards add up to the whole (plus FSDP padding).
          const replicated = shard === "none" ? 0 : (formula - bpe * Math.ceil(psi / dp));
          const shardedTotal = held.reduce((n, h) => n + h - replicated, 0);
          const padding = plan.units.reduce((n, u) => n + u.padding, 0);
          if (shard !== "none") expect(shardedTotal).toBe(bpe * (psi + padding));
        }
      }
    });
  }
});

describe("activation memory per schedule", () => {
  it("1F1B keeps at most p − s micro-batches on stage s; GPipe keeps all m", () => {
    const p = 4;
    const m = 8;
    const ofb = compileSample("mlp", "cpu", { stages: p, data_parallel: 1, chunks: m, schedule: "1f1b", shard: "none" });
    const peaks = peakMicroBatchesInFlight(ofb);
    peaks.forEach((n, s) => expect(n).toBeLessThanOrEqual(p - s));
    expect(peaks[0]).toBe(p);
    const gpipe = compileSample("mlp", "cpu", { stages: p, data_parallel: 1, chunks: m, schedule: "gpipe", shard: "none" });
    expect(peakMicroBatchesInFlight(gpipe)).toEqual([m, m, m, m]);
  });

  it("with checkpointing a micro-batch keeps only its stage input until its recompute", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 1, chunks: 4, schedule: "gpipe", checkpoint: "always", shard: "none" });
    const act = c.costs.activations[1]!;
    const bufs = c.memory[1]!.buffers.filter((b) => b.stage === 1 && b.kind === "activation");
    const stash = bufs.filter((b) => b.name.endsWith(" activations"));
    const recompute = c.programs[1]!.actions.filter((a) => a.action.kind === "R");
    expect(recompute.length).toBe(4);
    for (const b of stash) expect(c.programs[1]!.actions[b.from]!.action.kind).toBe("R");
    expect(bufs.filter((b) => b.name.endsWith(" input")).every((b) => b.bytes === act.input)).toBe(true);
  });
});

describe("arena layout", () => {
  it("no two buffers share bytes while both are live, and the arena covers the peak", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" });
    for (const m of c.memory) {
      expect(m.arenaBytes).toBeGreaterThanOrEqual(m.peakBytes);
      for (const a of m.buffers) {
        expect(a.offset % 256).toBe(0);
        for (const b of m.buffers) {
          if (a === b) continue;
          const live = (a.start < b.end && b.start < a.end) || a.start === b.start;
          const shared = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
          if (live && a.bytes > 0 && b.bytes > 0) expect(shared, `${a.name} and ${b.name}`).toBe(false);
        }
      }
    }
  });
});

describe("plans that do not fit", () => {
  it("name the device, the bytes needed and available, and alternatives verified to fit", () => {
    const overrides = { stages: 2, data_parallel: 2, chunks: 2, checkpoint: "never" };
    const model = checkFile(samplePath("gpt2-124m"), { overrides: sets(overrides) }).model!;
    let error: unknown;
    try {
      compileModel(model, { cluster: "cpu", source: "gpt2", fsmVersion: "test" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MemoryError);
    const e = error as MemoryError;
    expect(e.message).toMatch(/program \d \(stage \d on ranks \d\.\.\d\) needs [\d.]+ GiB \(\d+ bytes\) but each cpu device has 12\.00 GiB \(12884901888 bytes\)/);
    expect(e.shortfall.neededBytes).toBeGreaterThan(e.shortfall.availableBytes);
    expect(e.fits.length).toBeGreaterThan(0);
    for (const fit of e.fits) {
      expect(e.message).toContain(fit.change);
      expect(fit.peakBytes).toBeLessThanOrEqual(12 * 2 ** 30);
      // Verified: the suggested --set overrides compile.
      const extra = fit.set.map((s) => s.replace(/^parallel\./, ""));
      const more = Object.fromEntries(extra.map((s) => s.split("=") as [string, string]));
      const c = compileSample("gpt2-124m", "cpu", { ...overrides, ...more });
      // The alternatives are verified against their memory plans (laying out each one's runtime arenas would
      // cost seconds apiece); the plan compile then writes carries both.
      expect(Math.max(...c.plan.memory.map((m) => m.arenaBytes))).toBe(fit.peakBytes);
    }
  });
});
