// Collectives, OPTIMIZER and FREE in lowered schedules: group rendezvous, hand-computed timelines, exposed
// communication, gathered-parameter memory, and the validation problems of broken groups.
import { describe, expect, it } from "vitest";
import { formatAction, shardAction, type ShardKind } from "../../src/schedule/action.js";
import { collectiveKey } from "../../src/schedule/collectives.js";
import { uniformCosts, type ScheduleCosts } from "../../src/schedule/costs.js";
import { ScheduleEditor, type Place } from "../../src/schedule/edit.js";
import { formatListing } from "../../src/schedule/listing.js";
import { lower } from "../../src/schedule/lower.js";
import type { LoweredSchedule, StreamName } from "../../src/schedule/lowered.js";
import { buildComputeOrder, type ScheduleSpec } from "../../src/schedule/orders/build.js";
import { simulate } from "../../src/schedule/simulate.js";
import { validate, type Validation } from "../../src/schedule/validate.js";

const pipeline = (spec: ScheduleSpec): LoweredSchedule => lower(buildComputeOrder(spec));

/** Action id by rank and text (the first one). */
function find(s: LoweredSchedule, rank: number, text: string): number {
  const a = s.actions.find((x) => x.rank === rank && formatAction(x.action) === text);
  if (!a) throw new Error(`no ${text} on rank ${rank}`);
  return a.id;
}

interface Shard {
  readonly kind: ShardKind;
  readonly stage: number;
  readonly mb?: number;
  readonly unit?: number;
  readonly peer?: number;
  readonly deps?: readonly number[];
  readonly group?: readonly number[];
  readonly groupSize?: number;
  readonly bytes?: number;
}

/** Adds a shard action on its usual stream (collectives comm, OPTIMIZER and FREE compute). */
function addShard(ed: ScheduleEditor, rank: number, x: Shard, place: Place = "end", stream?: StreamName): number {
  const { kind, stage, mb, unit, peer, ...rest } = x;
  const fields = { ...(mb !== undefined && { mb }), ...(unit !== undefined && { unit }), ...(peer !== undefined && { peer }) };
  const where = stream ?? (kind === "OPTIMIZER" || kind === "FREE" ? "compute" : "comm");
  return ed.add({ rank, stream: where, action: shardAction(kind, stage, fields), ...rest }, place);
}

/** The last backward (B or W) of each stage: where its gradients are complete. */
function lastBackward(s: LoweredSchedule, stage: number): number {
  const rank = s.stageRank[stage]!;
  const ids = s.streams[rank]!.compute.filter((id) => ["B", "W"].includes(s.actions[id]!.action.kind) && s.actions[id]!.action.stage === stage);
  return ids.at(-1)!;
}

/**
 * Per stage: a gradient ALL_REDUCE among its data-parallel replicas (outside the simulation: group [rank],
 * groupSize 2) after its last backward; per rank: a global-norm ALL_REDUCE over every rank after its
 * stages' gradient reductions; per stage: an OPTIMIZER after the global norm.
 */
function withDataParallelStep(s: LoweredSchedule): LoweredSchedule {
  const ed = new ScheduleEditor(s);
  const all = Array.from({ length: s.ranks }, (_, r) => r);
  const grads: number[][] = all.map(() => []);
  for (let stage = 0; stage < s.stages; stage++) {
    const rank = s.stageRank[stage]!;
    grads[rank]!.push(addShard(ed, rank, { kind: "ALL_REDUCE", stage, unit: 0, deps: [lastBackward(s, stage)], group: [rank], groupSize: 2, bytes: 100 }));
  }
  for (const rank of all) {
    const first = s.stageRank.indexOf(rank);
    const norm = addShard(ed, rank, { kind: "ALL_REDUCE", stage: first, deps: grads[rank]!, group: all, bytes: 4 });
    s.stageRank.forEach((r, stage) => {
      if (r === rank) addShard(ed, rank, { kind: "OPTIMIZER", stage, deps: [norm] });
    });
  }
  return ed.build();
}

function expectValid(s: LoweredSchedule): void {
  const v = validate(s);
  expect(v.problems.map((p) => p.message)).toEqual([]);
}

function codes(v: Validation): string[] {
  return [...new Set(v.problems.map((p) => p.code))].sort();
}

describe("a data-parallel training step on a 1F1B pipeline", () => {
  const c = 0.5;
  const o = 0.25;
  const costs = uniformCosts({ f: 1, b: 2, collective: c, optimizer: o });
  const s = withDataParallelStep(pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 }));

  it("lists the reductions on the comm streams and the optimizer steps on the compute streams", () => {
    expect(formatListing(s)).toBe(
      [
        "r0 compute: 0F0 0F1 0B0 0B1 0OPTIMIZER",
        "r0 comm: 0SEND_F0@1 0SEND_F1@1 0RECV_B0@1 0RECV_B1@1 0ALL_REDUCEu0 0ALL_REDUCE",
        "r1 compute: 1F0 1B0 1F1 1B1 1OPTIMIZER",
        "r1 comm: 1RECV_F0@0 1RECV_F1@0 1SEND_B0@0 1SEND_B1@0 1ALL_REDUCEu0 1ALL_REDUCE",
      ].join("\n"),
    );
    expectValid(s);
    expect(collectiveKey(s.actions[find(s, 0, "0ALL_REDUCE")]!)).toBe("ALL_REDUCE [0,1]");
    expect(collectiveKey(s.actions[find(s, 1, "1ALL_REDUCE")]!)).toBe("ALL_REDUCE [0,1]");
  });

  it("p = 2, m = 2, F = 1, B = 2, free transfers, collective c, optimizer o: step 9 + 2c + o, 2c of it exposed", () => {
    // Without shard actions 1F1B ends at (m + p − 1)(F + B) = 9: rank 1 runs 1F0 [1,2] 1B0 [2,4] 1F1 [4,5]
    // 1B1 [5,7]; rank 0 runs 0F0 [0,1] 0F1 [1,2] 0B0 [4,6] 0B1 [7,9].
    // Rank 1's gradient reduction follows 1B1 (and 1SEND_B1 at 7): [7, 7 + c]. Rank 0's follows 0B1:
    // [9, 9 + c]. The global norm starts when both members are there, at 9 + c, on both ranks, and ends
    // at 9 + 2c; each OPTIMIZER then runs [9 + 2c, 9 + 2c + o]. Step 9 + 2c + o = 10.25.
    // With free communication the same step is 9 + o: rank 0's reduction and the global norm, both on the
    // critical path, are exposed in full (2c); rank 1's reduction hides in rank 0's tail.
    const r = simulate(s, costs);
    const span = (rank: number, text: string): [number, number] => {
      const id = find(s, rank, text);
      return [r.run.start[id]!, r.run.end[id]!];
    };
    expect(span(1, "1ALL_REDUCEu0")).toEqual([7, 7 + c]);
    expect(span(0, "0ALL_REDUCEu0")).toEqual([9, 9 + c]);
    expect(span(0, "0ALL_REDUCE")).toEqual([9 + c, 9 + 2 * c]);
    expect(span(1, "1ALL_REDUCE")).toEqual([9 + c, 9 + 2 * c]);
    expect(span(0, "0OPTIMIZER")).toEqual([9 + 2 * c, 9 + 2 * c + o]);
    expect(span(1, "1OPTIMIZER")).toEqual([9 + 2 * c, 9 + 2 * c + o]);
    expect(r.stepTime).toBe(9 + 2 * c + o);
    expect(r.exposedCommTime).toBe(2 * c);
    // Compute busy 2(F + B) + o on each rank; comm busy: two collectives each (free transfers).
    for (const rank of r.perRank) {
      expect(rank.busy).toBe(6 + o);
      expect(rank.commBusy).toBe(2 * c);
    }
    expect(r.bubbleFraction).toBeCloseTo((2 * (9 + 2 * c + o) - 2 * (6 + o)) / (2 * (9 + 2 * c + o)), 12);
  });

  it("a collective lasts as long as its slowest member's cost", () => {
    const byStage: ScheduleCosts = { ...costs, collective: (_kind, _bytes, size, stage) => (size > 1 ? 1 + stage : 0) };
    const r = simulate(s, byStage);
    const norm = find(s, 0, "0ALL_REDUCE");
    expect(r.run.end[norm]! - r.run.start[norm]!).toBe(2);
  });

  it("works the same on larger pipelines: interleaved, zero bubble, checkpointed", () => {
    for (const spec of [
      { schedule: "interleaved", ranks: 4, microBatches: 8, virtualStages: 2 },
      { schedule: "zero_bubble", ranks: 4, microBatches: 8 },
      { schedule: "1f1b", ranks: 3, microBatches: 5, checkpoint: "always" },
    ] satisfies ScheduleSpec[]) {
      const base = pipeline(spec);
      const step = withDataParallelStep(base);
      expectValid(step);
      const plain = simulate(base, costs);
      const r = simulate(step, costs);
      // The global norm ends at the same moment on every rank, after every gradient reduction.
      const norms = step.actions.filter((a) => a.action.kind === "ALL_REDUCE" && a.group!.length > 1).map((a) => a.id);
      expect(new Set(norms.map((id) => r.run.end[id])).size).toBe(1);
      const reductions = step.actions.filter((a) => a.action.kind === "ALL_REDUCE" && a.group!.length === 1);
      const lastGrad = Math.max(...reductions.map((a) => r.run.end[a.id]!));
      expect(r.run.start[norms[0]!]).toBe(lastGrad);
      // Then each rank runs the optimizer steps of its v stages one after another.
      const v = step.stages / step.ranks;
      expect(r.stepTime).toBe(lastGrad + c + v * o);
      expect(r.stepTime).toBeGreaterThanOrEqual(plain.stepTime + 2 * c + v * o);
    }
  });
});

describe("exposed collective time", () => {
  const c = 1;
  const costs = uniformCosts({ f: 1, b: 2, collective: c });
  const s = pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 });

  it("a reduction that overlaps compute adds nothing; one on the critical path adds its full time", () => {
    // Rank 1 reduces each micro-batch's gradients after its backward: after 1B0 at [4, 5], under 1F1
    // [4, 5]; after 1B1 at [7, 8], before rank 0 ends at 9. Its optimizer waits for both and ends at 8.
    const hidden = new ScheduleEditor(s);
    const g0 = addShard(hidden, 1, { kind: "REDUCE_SCATTER", stage: 1, mb: 0, deps: [find(s, 1, "1B0")], group: [1], groupSize: 2, bytes: 8 }, { after: find(s, 1, "1SEND_B0@0") });
    const g1 = addShard(hidden, 1, { kind: "REDUCE_SCATTER", stage: 1, mb: 1, deps: [find(s, 1, "1B1")], group: [1], groupSize: 2, bytes: 8 });
    addShard(hidden, 1, { kind: "OPTIMIZER", stage: 1, deps: [g1] });
    const h = hidden.build();
    expectValid(h);
    const rh = simulate(h, costs);
    expect([rh.run.start[g0], rh.run.end[g0]]).toEqual([4, 5]);
    expect([rh.run.start[g1], rh.run.end[g1]]).toEqual([7, 8]);
    expect(rh.stepTime).toBe(9);
    expect(rh.exposedCommTime).toBe(0);
    expect(rh.perRank[1]!.commBusy).toBe(2 * c);

    // Rank 0's reduction after 0B1 (ends 9) holds its optimizer back: [9, 10], all of it exposed.
    const critical = new ScheduleEditor(h);
    const g = addShard(critical, 0, { kind: "REDUCE_SCATTER", stage: 0, deps: [find(s, 0, "0B1")], group: [0], groupSize: 2, bytes: 8 });
    addShard(critical, 0, { kind: "OPTIMIZER", stage: 0, deps: [g] });
    const rc = simulate(critical.build(), costs);
    expect(rc.stepTime).toBe(9 + c);
    expect(rc.exposedCommTime).toBe(c);
  });

  it("a communicator of one rank costs nothing under uniform costs", () => {
    const ed = new ScheduleEditor(s);
    const g = addShard(ed, 0, { kind: "ALL_REDUCE", stage: 0, deps: [find(s, 0, "0B1")], group: [0], bytes: 8 });
    addShard(ed, 0, { kind: "OPTIMIZER", stage: 0, deps: [g] });
    expect(simulate(ed.build(), costs).stepTime).toBe(9);
  });
});

describe("FSDP: gather before each forward and backward, free after", () => {
  const unitBytes = 10;
  /**
   * Every F and B of a rank gets an ALL_GATHER of unit 0 of its stage, put on the comm stream right after
   * the last comm action that it or an earlier compute action depends on (so the comm order stays
   * consistent with the compute order), and a FREE right after it that depends on it and on the gather.
   */
  function withFsdp(s: LoweredSchedule): LoweredSchedule {
    const ed = new ScheduleEditor(s);
    s.streams.forEach((st, rank) => {
      let covered = -1;
      for (const id of st.compute) {
        const a = s.actions[id]!;
        for (const d of a.deps) covered = Math.max(covered, st.comm.indexOf(d));
        const { stage, mb } = a.action;
        const place: Place = covered < 0 ? "start" : { after: st.comm[covered]! };
        const gather = addShard(ed, rank, { kind: "ALL_GATHER", stage, mb: mb!, unit: 0, group: [rank], groupSize: 2, bytes: unitBytes }, place);
        ed.addDeps(id, [gather]);
        addShard(ed, rank, { kind: "FREE", stage, mb: mb!, unit: 0, deps: [id, gather] }, { after: id });
      }
    });
    return ed.build();
  }

  const s = withFsdp(pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 }));
  const c = 0.5;
  const r = simulate(s, uniformCosts({ f: 1, b: 2, collective: c, activationBytes: 1 }));

  it("streams, validity, and every pass after its gather", () => {
    expect(formatListing(s)).toBe(
      [
        "r0 compute: 0F0 0FREE0u0 0F1 0FREE1u0 0B0 0FREE0u0 0B1 0FREE1u0",
        "r0 comm: 0ALL_GATHER0u0 0ALL_GATHER1u0 0SEND_F0@1 0SEND_F1@1 0RECV_B0@1 0ALL_GATHER0u0 0RECV_B1@1 0ALL_GATHER1u0",
        "r1 compute: 1F0 1FREE0u0 1B0 1FREE0u0 1F1 1FREE1u0 1B1 1FREE1u0",
        "r1 comm: 1RECV_F0@0 1ALL_GATHER0u0 1ALL_GATHER0u0 1RECV_F1@0 1ALL_GATHER1u0 1ALL_GATHER1u0 1SEND_B0@0 1SEND_B1@0",
      ].join("\n"),
    );
    expectValid(s);
    for (const a of s.actions) {
      if (a.action.kind !== "F" && a.action.kind !== "B") continue;
      const gather = a.deps.find((d) => s.actions[d]!.action.kind === "ALL_GATHER")!;
      expect(r.run.start[a.id]).toBeGreaterThanOrEqual(r.run.end[gather]!);
    }
  });

  it("step time and exposed gathers by hand (F = 1, B = 2, gather c = 0.5, free transfers)", () => {
    // Rank 0: gathers for 0F0 [0, .5] and 0F1 [.5, 1] (nothing ahead of them); 0F0 [.5, 1.5], 0F1 [1.5, 2.5].
    // Rank 1: 1RECV_F0 at 1.5, then gathers for 1F0 [1.5, 2] and 1B0 [2, 2.5]; 1F0 [2, 3], 1B0 [3, 5];
    // 1RECV_F1 at 2.5 (0F1 ends then), gathers for 1F1 [2.5, 3] and 1B1 [3, 3.5]; 1F1 [5, 6], 1B1 [6, 8].
    // Rank 0: 0RECV_B0 at 5, its gather [5, 5.5], 0B0 [5.5, 7.5]; 0RECV_B1 at 8, its gather [8, 8.5],
    // 0B1 [8.5, 10.5]. Step 10.5; with free gathers it is 1F1B's 9, so three gathers (0F0's, 1F0's and
    // 0B1's, on the critical path) are exposed: 1.5.
    expect(r.stepTime).toBe(10.5);
    expect(r.exposedCommTime).toBe(1.5);
  });

  it("gathered units count in memory from gather start to FREE", () => {
    // Rank 0 (activations weigh 1 per micro-batch): at .5 both forward gathers and 0F0's activation: 21;
    // then at most one gather and two activations. Rank 1: from 2.5 to 5 it holds 1B0's and both
    // prefetched gathers of micro-batch 1 plus 1F0's activation: 3·10 + 1 = 31.
    expect(r.perRank[0]!.peakBytes).toBe(2 * unitBytes + 1);
    expect(r.perRank[1]!.peakBytes).toBe(3 * unitBytes + 1);
    expect(r.perRank[0]!.memory).toEqual([
      { time: 0, bytes: 10 },
      { time: 0.5, bytes: 21 },
      { time: 1.5, bytes: 12 },
      { time: 2.5, bytes: 2 },
      { time: 5, bytes: 12 },
      { time: 7.5, bytes: 1 },
      { time: 8, bytes: 11 },
      { time: 10.5, bytes: 0 },
    ]);
    for (const rank of r.perRank) expect(rank.memory.at(-1)!.bytes).toBe(0);
  });
});

describe("broken collectives are caught with a picture", () => {
  const s = pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 });
  const all = [0, 1];

  it("two ranks entering a group's collectives in different orders", () => {
    const ed = new ScheduleEditor(s);
    for (const [rank, units] of [[0, [0, 1]], [1, [1, 0]]] as const) {
      for (const unit of units) addShard(ed, rank, { kind: "ALL_REDUCE", stage: rank, unit, deps: [lastBackward(s, rank)], group: all, bytes: 8 });
    }
    const v = validate(ed.build());
    expect(codes(v)).toEqual(["deadlock", "order"]);
    expect(v.problems[0]!.message).toBe("rank 1, step 7: rank 1 enters the collectives of group [0,1] in another order than rank 0: its 1st is 1ALL_REDUCEu1 where rank 0's is 0ALL_REDUCEu0");
    expect(v.problems[1]!.message).toMatch(/^rank 0, step 7: wait cycle: rank 0 comm 0ALL_REDUCEu0 waits for its group member rank 1 1ALL_REDUCEu0, which sits behind 1ALL_REDUCEu1 in its comm stream; rank 1 comm 1ALL_REDUCEu1 waits for its group member rank 0 0ALL_REDUCEu1, which sits behind 0ALL_REDUCEu0 in its comm stream/);
    expect(v.picture).toBe(
      [
        "step       | 0                1                2                3                4                5                6                7",
        "r0 compute | 0F0              0F1              .                .                .                0B0              .                0B1",
        "r0 comm    | .                0SEND_F0@1       0SEND_F1@1       .                0RECV_B0@1       .                0RECV_B1@1       [0ALL_REDUCEu0]!",
        "r1 compute | .                .                1F0              1B0              1F1              1B1              .                .",
        "r1 comm    | .                1RECV_F0@0       1RECV_F1@0       .                1SEND_B0@0       .                1SEND_B1@0       [1ALL_REDUCEu1]!",
      ].join("\n"),
    );
  });

  it("a member that never enters the collective", () => {
    const three = pipeline({ schedule: "1f1b", ranks: 3, microBatches: 2 });
    const ed = new ScheduleEditor(three);
    for (const rank of [0, 1]) addShard(ed, rank, { kind: "ALL_REDUCE", stage: rank, deps: [lastBackward(three, rank)], group: [0, 1, 2], bytes: 4 });
    const v = validate(ed.build());
    expect(codes(v)).toEqual(["deadlock", "unmatched"]);
    expect(v.problems[0]!.message).toBe("rank 0, step 12: 0ALL_REDUCE (the 1st ALL_REDUCE [0,1,2] on rank 0) is never entered by rank 2 of its group");
    expect(v.problems.filter((p) => p.code === "deadlock").map((p) => p.message)).toEqual([
      "rank 0, step 12: comm stream stuck at 0ALL_REDUCE: waits for rank 2 of group [0,1,2], which never enters ALL_REDUCE [0,1,2] (2 of 30 actions never run)",
      "rank 1, step 12: comm stream stuck at 1ALL_REDUCE: waits for rank 2 of group [0,1,2], which never enters ALL_REDUCE [0,1,2] (2 of 30 actions never run)",
    ]);
    expect(v.picture).toContain("[0ALL_REDUCE]!");
    expect(v.picture).toContain("[1ALL_REDUCE]!");
  });

  it("a collective that blocks a transfer its partner needs first: a wait cycle through the p2p stream", () => {
    // Rank 0 enters the global norm before it sends its first activation; rank 1 enters it at the end.
    const ed = new ScheduleEditor(s);
    addShard(ed, 0, { kind: "ALL_REDUCE", stage: 0, group: all, bytes: 4 }, "start");
    addShard(ed, 1, { kind: "ALL_REDUCE", stage: 1, group: all, bytes: 4 });
    const v = validate(ed.build());
    expect(codes(v)).toEqual(["deadlock"]);
    expect(v.problems[0]!.message).toMatch(/wait cycle: .*0ALL_REDUCE waits for its group member rank 1 1ALL_REDUCE, which sits behind 1RECV_F0@0/);
  });

  it("members that disagree, unusable groups, misplaced collectives", () => {
    const one = (x: Shard, rank = 0, stream?: StreamName): Validation => {
      const ed = new ScheduleEditor(s);
      addShard(ed, rank, x, "end", stream);
      return validate(ed.build());
    };
    const messages = (v: Validation): string[] => v.problems.filter((p) => p.code !== "deadlock").map((p) => p.message.replace(/^rank \d+(, step \d+|, never reached)?: /, ""));
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, bytes: 4 }))).toEqual(["0ALL_REDUCE needs its group (the simulated ranks that take part)"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, group: [0] }))).toEqual(["0ALL_REDUCE needs its bytes"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, group: [1, 0], bytes: 4 }))).toEqual(["0ALL_REDUCE has group [1,0], which is not in ascending order without repeats"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, group: [1], bytes: 4 }))).toEqual(["0ALL_REDUCE has group [1], which leaves out its own rank 0"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, group: [0, 5], bytes: 4 }))).toEqual(["0ALL_REDUCE has rank 5 in its group, outside 0..1"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, group: [0], groupSize: 0, bytes: 4 }))).toEqual(["0ALL_REDUCE has groupSize 0, not a count of at least its group's 1 ranks"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, group: [0], bytes: 4 }, 0, "compute"))).toEqual(["0ALL_REDUCE belongs on the comm stream, not compute"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 1, group: [0], bytes: 4 }))).toEqual(["1ALL_REDUCE: stage 1 runs on rank 1, not here"]);
    expect(messages(one({ kind: "ALL_REDUCE", stage: 0, mb: 2, group: [0], bytes: 4 }))).toEqual(["0ALL_REDUCE2 is outside the pipeline (2 stages, 2 micro-batches)"]);
    expect(messages(one({ kind: "OPTIMIZER", stage: 0, bytes: 4 }))).toEqual(["0OPTIMIZER takes no group, groupSize or bytes (only collectives do)"]);
    expect(messages(one({ kind: "OPTIMIZER", stage: 0 }, 0, "comm"))).toEqual(["0OPTIMIZER belongs on the compute stream, not comm"]);

    const ed = new ScheduleEditor(s);
    addShard(ed, 0, { kind: "BROADCAST", stage: 0, unit: 1, peer: 1, group: all, bytes: 4 });
    addShard(ed, 1, { kind: "BROADCAST", stage: 1, unit: 1, peer: 1, group: all, bytes: 8 });
    addShard(ed, 0, { kind: "BROADCAST", stage: 0, unit: 2, peer: 7, group: all, bytes: 4 });
    addShard(ed, 1, { kind: "BROADCAST", stage: 1, unit: 2, peer: 7, group: all, bytes: 4 });
    const v = validate(ed.build());
    expect(v.problems.map((p) => [p.code, p.message])).toEqual([
      ["placement", "rank 0, step 8: 0BROADCASTu2@7: root rank 7 is not in its group [0,1]"],
      ["placement", "rank 1, step 8: 1BROADCASTu2@7: root rank 7 is not in its group [0,1]"],
      ["collective", "rank 0, step 7: 0BROADCASTu1@1 and rank 1 1BROADCASTu1@1 (BROADCASTu1@1 [0,1]) disagree on bytes: 4 vs 8"],
    ]);
  });

  it("a pipeline action with group fields", () => {
    const f = s.actions[find(s, 0, "0F0")]!;
    const bad: LoweredSchedule = { ...s, actions: s.actions.map((a) => (a.id === f.id ? { ...a, bytes: 4 } : a)) };
    expect(validate(bad).problems.map((p) => p.message)).toEqual(["rank 0, step 0: 0F0 takes no group, groupSize or bytes (only collectives do)"]);
  });
});

describe("FREE and OPTIMIZER rules", () => {
  const s = pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 });
  const gatherShard = { kind: "ALL_GATHER", stage: 0, unit: 3, group: [0], bytes: 4 } as const;

  it("a FREE must depend on exactly one gather of its unit, and frees it once", () => {
    const ed = new ScheduleEditor(s);
    const g = addShard(ed, 0, gatherShard, "start");
    const other = addShard(ed, 0, { ...gatherShard, unit: 4 }, "start");
    ed.addDeps(find(s, 0, "0F0"), [g, other]);
    addShard(ed, 0, { kind: "FREE", stage: 0, unit: 3, deps: [find(s, 0, "0F0")] });
    addShard(ed, 0, { kind: "FREE", stage: 0, unit: 4, deps: [other] });
    addShard(ed, 0, { kind: "FREE", stage: 0, unit: 4, deps: [other] });
    const v = validate(ed.build());
    expect(v.problems.map((p) => [p.code, p.message.replace(/^rank 0, step \d+: /, "")])).toEqual([
      ["dependency", "0FREEu3 does not depend on the 0ALL_GATHER…u3 on rank 0 it frees (exactly one)"],
      ["duplicate", "0FREEu4 frees 0ALL_GATHERu4, which 0FREEu4 already frees"],
    ]);
  });

  it("an OPTIMIZER before a backward of its stage, or one that does not wait for its reductions", () => {
    const ed = new ScheduleEditor(s);
    addShard(ed, 0, { kind: "OPTIMIZER", stage: 0 }, { before: find(s, 0, "0B1") });
    const red = addShard(ed, 1, { kind: "REDUCE_SCATTER", stage: 1, deps: [find(s, 1, "1B1")], group: [1], groupSize: 4, bytes: 8 });
    addShard(ed, 1, { kind: "OPTIMIZER", stage: 1, deps: [find(s, 1, "1B1")] });
    addShard(ed, 1, { kind: "OPTIMIZER", stage: 1, deps: [red] });
    const v = validate(ed.build());
    expect(v.problems.map((p) => [p.code, p.message])).toEqual([
      ["duplicate", "rank 1, step 8: 1OPTIMIZER appears twice on rank 1"],
      ["order", "rank 0, step 6: 0OPTIMIZER comes before rank 0 0B1, a backward of its stage"],
      ["order", "rank 1, step 6: 1OPTIMIZER does not wait for rank 1 1REDUCE_SCATTER: it needs a dep on that reduction or a later comm action"],
    ]);
  });
});

describe("ScheduleEditor", () => {
  const s = pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 });

  it("keeps the base's ids, numbers additions after them and places them in the order added", () => {
    const ed = new ScheduleEditor(s);
    const x = find(s, 0, "0SEND_F1@1");
    const a = addShard(ed, 0, { kind: "ALL_GATHER", stage: 0, unit: 0, group: [0], bytes: 1 }, { before: x });
    const b = addShard(ed, 0, { kind: "ALL_GATHER", stage: 0, unit: 1, group: [0], bytes: 1 }, { before: x });
    const c = addShard(ed, 0, { kind: "ALL_GATHER", stage: 0, unit: 2, group: [0], bytes: 1 }, { after: x });
    const d = addShard(ed, 0, { kind: "ALL_GATHER", stage: 0, unit: 3, group: [0], bytes: 1 }, { after: x });
    const e = addShard(ed, 0, { kind: "ALL_GATHER", stage: 0, unit: 4, group: [0], bytes: 1 }, { after: a });
    expect([a, b, c, d, e]).toEqual([s.actions.length, s.actions.length + 1, s.actions.length + 2, s.actions.length + 3, s.actions.length + 4]);
    ed.addDeps(find(s, 0, "0F1"), [a]);
    const out = ed.build();
    expect(formatListing(out).split("\n")[1]).toBe("r0 comm: 0SEND_F0@1 0ALL_GATHERu0 0ALL_GATHERu4 0ALL_GATHERu1 0SEND_F1@1 0ALL_GATHERu2 0ALL_GATHERu3 0RECV_B0@1 0RECV_B1@1");
    expect(out.actions[find(s, 0, "0F1")]!.deps).toEqual([a]);
    expect(s.actions[find(s, 0, "0F1")]!.deps).toEqual([]);
    expect(out.actions.slice(0, s.actions.length).filter((x, i) => x !== s.actions[i]).map((x) => formatAction(x.action))).toEqual(["0F1"]);
    expect(validate(out).ok).toBe(true);
  });

  it("refuses anchors on another stream and unknown ids", () => {
    const ed = new ScheduleEditor(s);
    expect(() => addShard(ed, 0, { kind: "OPTIMIZER", stage: 0 }, { after: find(s, 0, "0SEND_F0@1") })).toThrow(/cannot place an action of rank 0 compute next to action #\d+ on rank 0 comm/);
    expect(() => addShard(ed, 0, { kind: "OPTIMIZER", stage: 0, deps: [999] })).toThrow(/no action #999 to depend on/);
    expect(() => ed.addDeps(999, [0])).toThrow(/no action #999/);
    expect(() => addShard(ed, 5, { kind: "OPTIMIZER", stage: 0 })).toThrow(/rank 5 is outside 0..1/);
  });
});

describe("costs for shard actions", () => {
  it("simulate names what the costs lack", () => {
    const s = pipeline({ schedule: "1f1b", ranks: 2, microBatches: 2 });
    const ed = new ScheduleEditor(s);
    addShard(ed, 0, { kind: "ALL_REDUCE", stage: 0, group: [0], groupSize: 2, bytes: 4 });
    const { collective: _c, ...pipelineOnly } = uniformCosts({ f: 1, b: 2 });
    expect(() => simulate(ed.build(), pipelineOnly)).toThrow(/0ALL_REDUCE on rank 0 is a collective, and these costs have no collective\(\)/);
  });

  it("uniformCosts checks the new options", () => {
    expect(() => uniformCosts({ f: 1, b: 2, collective: -1 })).toThrow(/collective must be a finite non-negative number/);
    expect(() => uniformCosts({ f: 1, b: 2, optimizer: NaN })).toThrow(/optimizer must be a finite non-negative number/);
    const u = uniformCosts({ f: 1, b: 2, collective: 3, optimizer: 2 });
    expect([u.collective!("ALL_GATHER", 1e9, 8, 0), u.collective!("ALL_GATHER", 1e9, 1, 0), u.optimizer!(0)]).toEqual([3, 0, 2]);
  });
});
