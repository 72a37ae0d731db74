// Communication/compute overlap from per-instruction timings: the union of comm intervals, the part of it
// the compute stream covered, with hand-computed expectations and a brute-force check on random intervals.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { createEngine } from "../../src/runtime/engines.js";
import type { DeviceInstruction, DeviceProgram, Stream } from "../../src/lower/device-program.js";
import { clusterOverlap, overlapFromTimings, overlapOfIntervals, unionIntervals } from "../../src/runtime/overlap.js";
import { rng } from "../support/prng.js";
import { samplePath, sets } from "../compile/helpers.js";

/** A program of instructions (stream, op) and their [start, end] timings, in the order given. */
function traced(list: readonly [Stream, string, number, number][]): { program: DeviceProgram; timings: Float64Array } {
  const instructions: DeviceInstruction[] = list.map(([stream, op]) => ({ stream, op, inputs: [], outputs: [], attrs: {}, waits: [], action: "a" }));
  const timings = new Float64Array(list.flatMap(([, , a, b]) => [a, b]));
  return { program: { slots: [], instructions, arenaBytes: 0, liveBytes: 0 }, timings };
}

describe("unionIntervals", () => {
  it("merges overlapping, touching and nested intervals and drops empty ones", () => {
    expect(unionIntervals([[5, 7], [1, 3], [2, 4], [4, 4.5], [6, 6.5], [9, 9]])).toEqual([[1, 4.5], [5, 7]]);
  });
});

describe("overlapFromTimings", () => {
  it("counts comm fully hidden when compute covers it", () => {
    const { program, timings } = traced([
      [0, "linear", 0, 10],
      [1, "comm.allGather", 2, 5],
    ]);
    expect(overlapFromTimings(program, timings)).toEqual({ commSeconds: 3, hiddenSeconds: 3, hiddenFraction: 1, computeSeconds: 10 });
  });

  it("counts nothing hidden when comm and compute are disjoint", () => {
    const { program, timings } = traced([
      [0, "linear", 0, 2],
      [1, "comm.allReduce", 2, 6],
      [0, "relu", 6, 7],
    ]);
    expect(overlapFromTimings(program, timings)).toEqual({ commSeconds: 4, hiddenSeconds: 0, hiddenFraction: 0, computeSeconds: 3 });
  });

  it("handles partial overlaps and several intervals on both streams", () => {
    // compute: [0,3] [4,8] [9,12]   → union 10
    // comm:    [1,5] [7,10] [11,14] → union 4+3+3 = 10
    // hidden:  [1,3]+[4,5] = 3, [7,8]+[9,10] = 2, [11,12] = 1 → 6
    const { program, timings } = traced([
      [0, "linear", 0, 3],
      [1, "comm.send", 1, 5],
      [0, "matmul", 4, 8],
      [1, "comm.recv", 7, 10],
      [0, "softmax", 9, 12],
      [1, "comm.reduceScatter", 11, 14],
    ]);
    const o = overlapFromTimings(program, timings);
    expect(o.commSeconds).toBeCloseTo(10, 12);
    expect(o.computeSeconds).toBeCloseTo(10, 12);
    expect(o.hiddenSeconds).toBeCloseTo(6, 12);
    expect(o.hiddenFraction).toBeCloseTo(0.6, 12);
  });

  it("counts nested and overlapping comm intervals once", () => {
    // comm [0,10] with [2,4] nested and [8,12] overlapping → union [0,12] = 12; compute [3,9] → hidden 6.
    const { program, timings } = traced([
      [1, "comm.allGather", 0, 10],
      [1, "comm.allGather", 2, 4],
      [1, "comm.reduceScatter", 8, 12],
      [0, "linear", 3, 9],
    ]);
    expect(overlapFromTimings(program, timings)).toEqual({ commSeconds: 12, hiddenSeconds: 6, hiddenFraction: 0.5, computeSeconds: 6 });
  });

  it("leaves the comm stream's kernels out of communication and out of compute", () => {
    // fsm_add_inplace on the comm stream over [4,8] is neither comm nor compute: comm [0,4], compute [2,3].
    const { program, timings } = traced([
      [1, "comm.reduceScatter", 0, 4],
      [1, "fsm_add_inplace", 4, 8],
      [0, "linear", 2, 3],
      [0, "relu", 5, 7],
    ]);
    expect(overlapFromTimings(program, timings)).toEqual({ commSeconds: 4, hiddenSeconds: 1, hiddenFraction: 0.25, computeSeconds: 3 });
  });

  it("is zero without communication", () => {
    const { program, timings } = traced([[0, "linear", 0, 1]]);
    expect(overlapFromTimings(program, timings)).toEqual({ commSeconds: 0, hiddenSeconds: 0, hiddenFraction: 0, computeSeconds: 1 });
  });

  it("rejects timings of the wrong length", () => {
    const { program } = traced([[0, "linear", 0, 1]]);
    expect(() => overlapFromTimings(program, new Float64Array(4))).toThrow(/2 timings|4 timings/);
  });

  it("agrees with a unit-cell count on random integer intervals", () => {
    const next = rng(7);
    for (let trial = 0; trial < 200; trial++) {
      const list: [Stream, string, number, number][] = [];
      const count = 1 + Math.floor(next() * 12);
      for (let k = 0; k < count; k++) {
        const stream: Stream = next() < 0.5 ? 0 : 1;
        const op = stream === 0 ? "linear" : next() < 0.8 ? "comm.allReduce" : "fsm_copy";
        const a = Math.floor(next() * 40);
        list.push([stream, op, a, a + Math.floor(next() * 10)]);
      }
      const covered = (t: number, keep: (s: Stream, op: string) => boolean): boolean => list.some(([s, op, a, b]) => keep(s, op) && a <= t && t + 1 <= b);
      let comm = 0;
      let compute = 0;
      let hidden = 0;
      for (let t = 0; t < 50; t++) {
        const c = covered(t, (s, op) => s === 1 && op.startsWith("comm."));
        const k = covered(t, (s) => s === 0);
        comm += Number(c);
        compute += Number(k);
        hidden += Number(c && k);
      }
      const { program, timings } = traced(list);
      const o = overlapFromTimings(program, timings);
      expect([o.commSeconds, o.computeSeconds, o.hiddenSeconds], JSON.stringify(list)).toEqual([comm, compute, hidden]);
      expect(o.hiddenFraction).toBe(comm > 0 ? hidden / comm : 0);
    }
  });
});

describe("overlapOfIntervals", () => {
  it("takes raw intervals in any order", () => {
    // comm [6,9] [0,2] → 5; compute [1,7] → 6; hidden [1,2] + [6,7] = 2.
    expect(overlapOfIntervals([[6, 9], [0, 2]], [[1, 7]])).toEqual({ commSeconds: 5, hiddenSeconds: 2, hiddenFraction: 0.4, computeSeconds: 6 });
  });
});

describe("clusterOverlap", () => {
  it("sums devices and takes the fraction of the sums", () => {
    const a = traced([
      [0, "linear", 0, 10],
      [1, "comm.allGather", 2, 5],
    ]); // comm 3, hidden 3
    const b = traced([
      [0, "linear", 0, 1],
      [1, "comm.allGather", 1, 2],
    ]); // comm 1, hidden 0
    expect(clusterOverlap([a.program, b.program], [a.timings, b.timings])).toEqual({ commSeconds: 4, hiddenSeconds: 3, hiddenFraction: 0.75, computeSeconds: 11 });
  });
});

describe("the native engine's lastTimings", () => {
  it("gives every device's program and one traced step's timings, which overlapFromTimings reads", async () => {
    const model = checkFile(samplePath("mlp"), { overrides: sets({ "parallel.shard": "fsdp", "parallel.stages": 1, "parallel.data_parallel": 2, "parallel.chunks": 2 }) }).model!;
    const plan = compileModel(model, { cluster: "cpu", devices: 2, source: "mlp", fsmVersion: "test" }).plan;
    const graph = graphFromJson(plan.model.name, plan.graph);
    const data = syntheticData(graph, { batch: plan.settings.batch, seed: 1 });
    const untraced = createEngine("native", plan, graph, 1);
    await untraced.step(data.batch(0));
    expect(untraced.lastTimings!().map((d) => d.timings.length)).toEqual([0, 0]);
    const engine = createEngine("native", plan, graph, 1, { trace: true });
    await engine.step(data.batch(0));
    const last = engine.lastTimings!();
    expect(last).toHaveLength(2);
    for (const { program, timings } of last) {
      expect(timings.length).toBe(2 * program.instructions.length);
      for (let i = 0; i < program.instructions.length; i++) expect(timings[2 * i + 1]!).toBeGreaterThanOrEqual(timings[2 * i]!);
      const o = overlapFromTimings(program, timings);
      expect(o.commSeconds).toBeGreaterThan(0); // FSDP gathers and reduce-scatters
      expect(o.hiddenSeconds).toBeLessThanOrEqual(o.commSeconds);
      expect(o.hiddenFraction).toBeGreaterThanOrEqual(0);
      expect(o.hiddenFraction).toBeLessThanOrEqual(1);
    }
  });
});
