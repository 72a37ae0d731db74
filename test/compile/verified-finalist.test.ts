// The search ranks finalists by its estimates; compile keeps the fastest compiled plan among the first few
// when the best one compiles slower than the next one's prediction (verifiedFinalist).
import { describe, expect, it } from "vitest";
import { MemoryError } from "../../src/compile/fit.js";
import { verifiedFinalist, type Compiled } from "../../src/compile/compile.js";
import type { Candidate, Evaluated } from "../../src/search/candidate.js";
import type { SearchResult } from "../../src/search/search.js";

const candidate = (stages: number): Candidate => ({
  stages,
  dataParallel: 8 / stages,
  tensorParallel: 1,
  virtualStages: 1,
  microBatches: 4,
  schedule: "1f1b",
  shard: "none",
  reshardAfterForward: true,
  shardGroup: 8 / stages,
  noSync: false,
  checkpoint: "never",
});
const evaluated = (stages: number, simulated: number): Evaluated => ({ candidate: candidate(stages), balance: [], recomputeLayers: [], estimate: simulated, simulated, memoryBytes: 0, bottleneck: 0, stageSeconds: [] });
const result = (...simulated: number[]): SearchResult => ({ ranked: simulated.map((s, i) => evaluated(2 ** i, s)), families: [], stats: {} as SearchResult["stats"], neighbors: () => [] });
// A compiled plan's step: its programs' makespan plus a calibration's fixed host cost (none by default).
const compiledAt = (makespan: number, host = 0): Compiled => ({ prediction: { stepTime: makespan + host, run: { makespan } } }) as unknown as Compiled;

describe("verifiedFinalist", () => {
  it("compares the programs' makespan with the search's estimates, not a step with a calibration's host cost", () => {
    let calls = 0;
    // 1.01 s of programs + 0.5 s of host cost per step: as predicted, so no other finalist is compiled.
    const out = verifiedFinalist(result(1.0, 1.02, 1.05), compiledAt(1.01, 0.5), () => (calls++, compiledAt(0.5)));
    expect(calls).toBe(0);
    expect(out.chosen).toBe(0);
  });

  it("keeps the best finalist without compiling another when it compiles as predicted", () => {
    let calls = 0;
    const out = verifiedFinalist(result(1.0, 1.02, 1.05), compiledAt(1.01), () => (calls++, compiledAt(0.5)));
    expect(calls).toBe(0);
    expect(out.chosen).toBe(0);
    expect(out.passed).toEqual([]);
  });

  it("compiles the next finalists while the best compiled is slower than their predictions, and keeps the fastest", () => {
    const compiledTimes = new Map([
      [2, 1.3],
      [4, 1.1],
    ]);
    const planned: number[] = [];
    const out = verifiedFinalist(result(1.0, 1.02, 1.05, 1.06), compiledAt(1.4), (e) => (planned.push(e.candidate.stages), compiledAt(compiledTimes.get(e.candidate.stages)!)));
    // Three finalists at most: the fourth is never compiled.
    expect(planned).toEqual([2, 4]);
    expect(out.chosen).toBe(2);
    expect(out.compiled.prediction.stepTime).toBe(1.1);
    expect(out.passed).toHaveLength(2);
    expect(out.passed[0]!.reason).toMatch(/its compiled plan predicts 1\.400 s a step \(the search's 1\.000 s\)/);
  });

  it("passes over a finalist whose memory plan does not fit", () => {
    const out = verifiedFinalist(result(1.0, 1.02), compiledAt(2), () => {
      throw Object.assign(Object.create(MemoryError.prototype) as MemoryError, { message: "does not fit" });
    });
    expect(out.chosen).toBe(0);
  });
});

describe("verifiedFinalist's finishing step (the runtime's arenas)", () => {
  const unfit = (): never => {
    throw Object.assign(Object.create(MemoryError.prototype) as MemoryError, { message: "arenas do not fit" });
  };

  it("finishes only the kept plan, not the finalists compiled to check it", () => {
    const finished: number[] = [];
    const compiledTimes = new Map([
      [2, 1.3],
      [4, 1.1],
    ]);
    const out = verifiedFinalist(
      result(1.0, 1.02, 1.05),
      compiledAt(1.4),
      (e) => compiledAt(compiledTimes.get(e.candidate.stages)!),
      (c) => (finished.push(c.prediction.stepTime), c),
    );
    expect(finished).toEqual([1.1]);
    expect(out.chosen).toBe(2);
  });

  it("finishes the next fastest compiled plan when the fastest one's arenas do not fit", () => {
    const out = verifiedFinalist(result(1.0, 1.02, 1.05), compiledAt(1.4), (e) => compiledAt(e.candidate.stages === 2 ? 1.3 : 1.1), (c) => (c.prediction.stepTime === 1.1 ? unfit() : c));
    expect(out.chosen).toBe(1);
    expect(out.compiled.prediction.stepTime).toBe(1.3);
    expect(out.passed[0]!.reason).toMatch(/compiles to 1\.300 s/);
  });

  it("says which passed-over finalist's arenas did not fit", () => {
    const out = verifiedFinalist(result(1.0, 1.02), compiledAt(1.4), () => compiledAt(1.5), (c) => (c.prediction.stepTime === 1.4 ? unfit() : c));
    expect(out.chosen).toBe(1);
    expect(out.passed[0]!.reason).toBe("its compiled plan's arenas do not fit the device");
  });

  it("throws the MemoryError when no compiled finalist's arenas fit", () => {
    expect(() => verifiedFinalist(result(1.0, 1.02), compiledAt(1.4), () => compiledAt(1.2), unfit)).toThrow(MemoryError);
  });
});
