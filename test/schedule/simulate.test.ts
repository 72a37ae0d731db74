// Simulation: closed-form bubbles, in-flight micro-batches, memory conventions, exposed communication.
import { describe, expect, it } from "vitest";
import { uniformCosts, type ScheduleCosts } from "../../src/schedule/costs.js";
import { formatListing, parseListing } from "../../src/schedule/listing.js";
import { lower } from "../../src/schedule/lower.js";
import { buildComputeOrder, type ScheduleSpec } from "../../src/schedule/orders/build.js";
import { simulate, type SimulationReport } from "../../src/schedule/simulate.js";
import { validate } from "../../src/schedule/validate.js";

/** Lowered for the costs it runs under (so the comm order fits them), validated, simulated. */
function run(spec: ScheduleSpec, costs: ScheduleCosts): SimulationReport {
  const s = lower(buildComputeOrder(spec), { costs });
  const v = validate(s);
  if (!v.ok) throw new Error(v.problems[0]!.message);
  return simulate(s, costs);
}

// F = 1, full backward B = 2 split as I = 1 and W = 1 (the zero-bubble paper's T_F = T_B = T_W), free comm.
const paper = uniformCosts({ f: 1, b: 2, w: 1 });

describe("bubble fractions with uniform stages and free communication", () => {
  for (const schedule of ["gpipe", "1f1b"] as const) {
    it(`${schedule}: (p − 1) / (m + p − 1)`, () => {
      for (const p of [1, 2, 3, 4, 8, 16]) {
        for (const m of [1, 2, 3, 4, 8, 16, 33]) {
          const r = run({ schedule, ranks: p, microBatches: m }, paper);
          expect(r.bubbleFraction, `p=${p} m=${m}`).toBeCloseTo((p - 1) / (m + p - 1), 12);
          expect(r.stepTime).toBeCloseTo((m + p - 1) * 3, 12);
        }
      }
    });
  }

  it("interleaved (Megatron construction, m a multiple of p): (p − 1) / (v·m + p − 1)", () => {
    for (const p of [1, 2, 3, 4, 8]) {
      for (const k of [1, 2, 4]) {
        for (const v of [1, 2, 3, 4]) {
          const m = k * p;
          const r = run({ schedule: "interleaved", ranks: p, microBatches: m, virtualStages: v }, paper);
          expect(r.bubbleFraction, `p=${p} m=${m} v=${v}`).toBeCloseTo((p - 1) / (v * m + p - 1), 12);
        }
      }
    }
  });

  it("ZB-H1 with T_F = T_I = T_W and m ≥ p: each rank idles (p − 1)(T_F + T_I − T_W), so (p − 1) / (3m + p − 1)", () => {
    for (const p of [1, 2, 3, 4, 8, 16]) {
      for (const m of [p, p + 1, 2 * p, 4 * p + 3]) {
        const r = run({ schedule: "zero_bubble", ranks: p, microBatches: m }, paper);
        for (const rank of r.perRank) expect(rank.idle).toBeCloseTo(p - 1, 12);
        expect(r.bubbleFraction, `p=${p} m=${m}`).toBeCloseTo((p - 1) / (3 * m + p - 1), 12);
      }
    }
  });

  it("ZB-H1 with a lighter W (T_W = T_F / 2) idles (p − 1)(T_F + T_I − T_W) per rank too", () => {
    const costs = uniformCosts({ f: 1, b: 1.5, w: 0.5 });
    for (const [p, m] of [[4, 8], [8, 8], [8, 32]] as const) {
      const r = run({ schedule: "zero_bubble", ranks: p, microBatches: m }, costs);
      for (const rank of r.perRank) expect(rank.idle).toBeCloseTo((p - 1) * (1 + 1 - 0.5), 12);
    }
  });

  it("ZB-H1's bubble is about a third of 1F1B's: 11/27 ≈ 0.41 of its fraction at p = 4, m = 8, exactly 1/3 of its idle time", () => {
    const zb = run({ schedule: "zero_bubble", ranks: 4, microBatches: 8 }, paper);
    const ofb = run({ schedule: "1f1b", ranks: 4, microBatches: 8 }, paper);
    const ratio = zb.bubbleFraction / ofb.bubbleFraction;
    expect(ratio).toBeGreaterThan(0.25);
    expect(ratio).toBeLessThan(0.45);
    expect(ratio).toBeCloseTo(11 / 27, 12);
    expect(zb.perRank[0]!.idle / ofb.perRank[0]!.idle).toBeCloseTo(1 / 3, 12);
  });

  it("checkpointing: R needs only its own F, so it runs while its rank waits for the gradient", () => {
    // The first recompute on each rank hides in the wait for the first gradient: the bubble stays
    // (p − 1)(F + B) and the step grows by m·R, not by (m + p − 1)·R.
    const costs = uniformCosts({ f: 1, b: 2, r: 1 });
    for (const schedule of ["gpipe", "1f1b"] as const) {
      const r = run({ schedule, ranks: 4, microBatches: 8, checkpoint: "always" }, costs);
      for (const rank of r.perRank) expect(rank.busy).toBeCloseTo(8 * 4, 12);
      expect(r.stepTime).toBeCloseTo(8 * 4 + (4 - 1) * 3, 12);
    }
    const last = run({ schedule: "1f1b", ranks: 4, microBatches: 8, checkpoint: "except_last" }, costs);
    for (const rank of last.perRank) expect(rank.busy).toBeCloseTo(8 * 3 + 7, 12);
  });
});

describe("micro-batches in flight and activation memory", () => {
  const unit = uniformCosts({ f: 1, b: 2, w: 1, activationBytes: 1, inputBytes: 0.25, weightGradBytes: 0.5 });

  it("1F1B holds at most p − s micro-batches on stage s; GPipe holds all m", () => {
    for (const [p, m] of [[4, 8], [8, 3], [6, 6]] as const) {
      const ofb = run({ schedule: "1f1b", ranks: p, microBatches: m }, unit);
      const gp = run({ schedule: "gpipe", ranks: p, microBatches: m }, unit);
      for (let s = 0; s < p; s++) {
        expect(ofb.peakInFlight[s]).toBe(Math.min(p - s, m));
        expect(ofb.perRank[s]!.peakBytes).toBeCloseTo(Math.min(p - s, m), 12);
        expect(gp.peakInFlight[s]).toBe(m);
        expect(gp.perRank[s]!.peakBytes).toBeCloseTo(m, 12);
      }
    }
  });

  it("ZB-H1 keeps 1F1B's p − s full stashes and at most s + 1 W-pending ones; its peak never exceeds 1F1B's", () => {
    const p = 6;
    const m = 12;
    const zb = run({ schedule: "zero_bubble", ranks: p, microBatches: m }, unit);
    const ofb = run({ schedule: "1f1b", ranks: p, microBatches: m }, unit);
    const ofbPeak = Math.max(...ofb.perRank.map((r) => r.peakBytes));
    for (let s = 0; s < p; s++) {
      expect(zb.peakInFlight[s]).toBe(p - s);
      expect(zb.peakAwaitingW[s]).toBe(s + 1);
      // Full stashes of p − s micro-batches plus what the s deferred W's still need.
      expect(zb.perRank[s]!.peakBytes).toBeCloseTo(p - s + 0.5 * s, 12);
      expect(zb.perRank[s]!.peakBytes).toBeLessThanOrEqual(ofbPeak);
    }
    expect(ofb.peakAwaitingW.every((n) => n === 0)).toBe(true);
  });

  it("a checkpointed micro-batch keeps only its stage input between F and R", () => {
    const p = 4;
    const m = 8;
    const always = run({ schedule: "1f1b", ranks: p, microBatches: m, checkpoint: "always" }, unit);
    for (let s = 0; s < p; s++) expect(always.perRank[s]!.peakBytes).toBeCloseTo((p - s - 1) * 0.25 + 1, 12);
    const gpAlways = run({ schedule: "gpipe", ranks: p, microBatches: m, checkpoint: "always" }, unit);
    const gpLast = run({ schedule: "gpipe", ranks: p, microBatches: m, checkpoint: "except_last" }, unit);
    const gpNever = run({ schedule: "gpipe", ranks: p, microBatches: m, checkpoint: "never" }, unit);
    for (let s = 0; s < p; s++) {
      expect(gpAlways.perRank[s]!.peakBytes).toBeCloseTo((m - 1) * 0.25 + 1, 12);
      expect(gpLast.perRank[s]!.peakBytes).toBeCloseTo((m - 1) * 0.25 + 1, 12);
      expect(gpNever.perRank[s]!.peakBytes).toBeCloseTo(m, 12);
    }
  });

  it("memory timelines start at time 0, end empty and list strictly increasing times", () => {
    const r = run({ schedule: "zero_bubble", ranks: 4, microBatches: 8, checkpoint: "always" }, unit);
    r.perRank.forEach((rank, s) => {
      // Rank 0 starts with a checkpointed forward at time 0; the others start empty.
      expect(rank.memory[0]).toEqual({ time: 0, bytes: s === 0 ? 0.25 : 0 });
      expect(rank.memory.at(-1)!.bytes).toBeCloseTo(0, 12);
      for (let i = 1; i < rank.memory.length; i++) expect(rank.memory[i]!.time).toBeGreaterThan(rank.memory[i - 1]!.time);
    });
  });
});

describe("communication", () => {
  it("GPipe: transfers cross the pipeline once each way on the critical path, 2(p − 1)·c exposed", () => {
    for (const [p, m, c] of [[4, 8, 0.5], [4, 8, 0.1], [8, 16, 0.25], [2, 4, 1]] as const) {
      const r = run({ schedule: "gpipe", ranks: p, microBatches: m }, uniformCosts({ f: 1, b: 2, comm: c }));
      expect(r.exposedCommTime).toBeCloseTo(2 * (p - 1) * c, 9);
      expect(r.stepTime).toBeCloseTo((m + p - 1) * 3 + 2 * (p - 1) * c, 9);
    }
  });

  it("comm streams carry every transfer; most of it overlaps compute", () => {
    const p = 4;
    const m = 16;
    const c = 0.1;
    for (const schedule of ["1f1b", "zero_bubble", "gpipe"] as const) {
      const r = run({ schedule, ranks: p, microBatches: m }, uniformCosts({ f: 1, b: 2, comm: c }));
      // Ends send or receive one activation and one gradient per micro-batch, middle ranks two of each.
      r.perRank.forEach((rank, s) => expect(rank.commBusy).toBeCloseTo((s === 0 || s === p - 1 ? 2 : 4) * m * c, 9));
      const totalComm = r.perRank.reduce((t, rank) => t + rank.commBusy, 0) / 2;
      expect(r.exposedCommTime).toBeGreaterThanOrEqual(2 * (p - 1) * c - 1e-9);
      expect(r.exposedCommTime).toBeLessThan(totalComm);
    }
  });

  it("with free transfers nothing is exposed", () => {
    expect(run({ schedule: "interleaved", ranks: 4, microBatches: 8, virtualStages: 2 }, paper).exposedCommTime).toBe(0);
  });
});

describe("simulate's contract", () => {
  it("is deterministic", () => {
    const a = run({ schedule: "interleaved", ranks: 4, microBatches: 8, virtualStages: 3, checkpoint: "except_last" }, uniformCosts({ f: 1, b: 2, comm: 0.2 }));
    const b = run({ schedule: "interleaved", ranks: 4, microBatches: 8, virtualStages: 3, checkpoint: "except_last" }, uniformCosts({ f: 1, b: 2, comm: 0.2 }));
    expect(b).toEqual(a);
  });

  it("refuses a schedule that deadlocks", () => {
    const s = lower(buildComputeOrder({ schedule: "1f1b", ranks: 2, microBatches: 2 }));
    const broken = parseListing(s, formatListing(s).replace(" 1SEND_B0@0", ""));
    expect(() => simulate(broken, paper)).toThrow(/schedule 1f1b deadlocks; validate\(\) shows where/);
  });

  it("a collective without its group (a listing does not carry one) is reported, not guessed", () => {
    const s = lower(buildComputeOrder({ schedule: "1f1b", ranks: 2, microBatches: 2 }));
    const withShard = parseListing(s, formatListing(s).replace("r0 comm:", "r0 comm: 0ALL_REDUCEu0"));
    expect(() => simulate(withShard, paper)).toThrow(/schedule 1f1b deadlocks; validate\(\) shows where/);
    expect(validate(withShard).problems.map((p) => p.message)).toEqual([
      "rank 0, step 0: 0ALL_REDUCEu0 needs its group (the simulated ranks that take part)",
      "rank 0, step 0: 0ALL_REDUCEu0 needs its bytes",
      expect.stringMatching(/^rank 0, step 0: comm stream stuck at 0ALL_REDUCEu0: can never run: needs its group/),
    ]);
  });

  it("uniformCosts checks its inputs", () => {
    expect(() => uniformCosts({ f: 1, b: 2, w: 3 })).toThrow(/cannot exceed the full backward/);
    expect(() => uniformCosts({ f: -1, b: 2 })).toThrow(/f must be a finite non-negative number/);
    expect(() => uniformCosts({ f: 1, b: 2, inputBytes: 2 })).toThrow(/inputBytes \(2\) cannot exceed activationBytes/);
  });
});
