// Validation: every generated schedule is deadlock-free; broken ones are caught with a rank × step picture.
import { describe, expect, it } from "vitest";
import { formatListing, parseListing } from "../../src/schedule/listing.js";
import { lower } from "../../src/schedule/lower.js";
import type { LoweredSchedule } from "../../src/schedule/lowered.js";
import { buildComputeOrder } from "../../src/schedule/orders/build.js";
import { oneFOneBOrder } from "../../src/schedule/orders/one-f-one-b.js";
import { buildSchedule } from "../../src/schedule/schedule.js";
import { assertValid, validate, type Validation } from "../../src/schedule/validate.js";
import { scheduleGrid } from "./helpers.js";

const base = lower(oneFOneBOrder({ ranks: 3, microBatches: 4 }));
const listing = formatListing(base);

/** The 1F1B listing with one textual edit, wired again. */
function edited(from: string, to: string): LoweredSchedule {
  expect(listing).toContain(from);
  return parseListing(base, listing.replace(from, to));
}

function codes(v: Validation): string[] {
  return [...new Set(v.problems.map((p) => p.code))].sort();
}

describe("generated schedules", () => {
  const grid = scheduleGrid();
  it(`are valid and deadlock-free over ${grid.length} shapes (p ≤ 32, m ≤ 8p, v ≤ 4, all checkpoint modes)`, () => {
    const bad: string[] = [];
    for (const spec of grid) {
      const v = validate(lower(buildComputeOrder(spec)));
      if (!v.ok) bad.push(`${JSON.stringify(spec)}: ${v.problems[0]!.message}`);
    }
    expect(bad).toEqual([]);
  });
});

describe("broken schedules", () => {
  it("a dropped SEND: the RECV waiting for it is named with its rank and step, and marked", () => {
    const v = validate(edited(" 1SEND_F1@2", ""));
    expect(v.ok).toBe(false);
    expect(v.problems.map((p) => p.message)).toEqual([
      "rank 2, step 4: 2RECV_F1@1 has no matching 1SEND_F1@2 on rank 1",
      "rank 2, step 4: comm stream stuck at 2RECV_F1@1: waits for a 1SEND_F1@2 that rank 1 never posts (40 of 55 actions never run)",
    ]);
    expect(v.problems[0]).toMatchObject({ code: "unmatched", rank: 2, step: 4 });
    expect(v.picture).toBe(
      [
        "step       | 0             1             2             3             4             5             6",
        "r0 compute | 0F0           0F1           0F2           0B0!          .             .             .",
        "r0 comm    | .             0SEND_F0@1    0SEND_F1@1    .             0SEND_F2@1    0RECV_B0@1!   .",
        "r1 compute | .             .             1F0           1F1           1B0!          .             .",
        "r1 comm    | .             1RECV_F0@0    1RECV_F1@0    1SEND_F0@2    1RECV_F2@0    1RECV_B0@2!   .",
        "r2 compute | .             .             .             .             2F0           2B0           2F1!",
        "r2 comm    | .             .             .             2RECV_F0@1    [2RECV_F1@1]! .             .",
      ].join("\n"),
    );
  });

  it("a RECV moved after the SEND that depends on it: a wait cycle on one rank", () => {
    const v = validate(edited("r1 comm: 1RECV_F0@0 1RECV_F1@0 1SEND_F0@2", "r1 comm: 1SEND_F0@2 1RECV_F1@0 1RECV_F0@0"));
    expect(codes(v)).toEqual(["deadlock"]);
    expect(v.problems[0]!.message).toBe(
      "rank 1, step 0: wait cycle: rank 1 compute 1F0 waits for rank 1 1RECV_F0@0, which sits behind 1SEND_F0@2 in its comm stream; " +
        "rank 1 comm 1SEND_F0@2 waits for rank 1 1F0 (53 of 56 actions never run)",
    );
    expect(v.picture).toContain("[1F0]!");
    expect(v.picture).toContain("[1SEND_F0@2]!");
  });

  it("two ranks that both send first: a cross-rank wait cycle between their comm streams", () => {
    const v = validate(edited("r0 comm: 0SEND_F0@1 0SEND_F1@1", "r0 comm: 0SEND_F1@1 0SEND_F0@1"));
    expect(codes(v)).toEqual(["deadlock"]);
    expect(v.problems[0]!.message).toMatch(/^rank \d, step 0: wait cycle: .*0SEND_F1@1.*1RECV_F0@0/);
  });

  it("a backward before its forward", () => {
    const v = validate(edited("r2 compute: 2F0 2B0", "r2 compute: 2B0 2F0"));
    expect(codes(v)).toEqual(["deadlock", "order"]);
    expect(v.problems[0]!.message).toBe("rank 2, step 0: rank 2 2B0 comes before its forward 2F0");
    expect(v.problems[1]!.message).toMatch(/^rank 2, step 0: compute stream stuck at 2B0: waits for 2F0, which comes later in the same stream/);
    expect(v.picture.split("\n").find((l) => l.startsWith("r2 compute"))).toMatch(/^r2 compute \| \[2B0\]!/);
  });

  it("a recompute after its backward, and a W before its I", () => {
    const ckpt = lower(buildComputeOrder({ schedule: "zero_bubble", ranks: 2, microBatches: 2, checkpoint: "always" }));
    const text = formatListing(ckpt);
    expect(text).toContain("1R0 1I0");
    const v = validate(parseListing(ckpt, text.replace("1R0 1I0", "1I0 1R0").replace("0I1 0W1", "0W1 0I1")));
    expect(v.problems.filter((p) => p.code === "order").map((p) => p.message)).toEqual([
      "rank 0, never reached: rank 0 0W1 comes before its 0I1",
      "rank 1, never reached: rank 1 1R0 must sit between 1F0 and its backward",
    ]);
  });

  it("duplicates, missing backwards, out-of-range stages and wrong peers", () => {
    expect(codes(validate(edited("r0 compute: 0F0", "r0 compute: 0F0 0F0")))).toContain("duplicate");
    const missing = validate(edited(" 0B3", ""));
    expect(missing.problems.map((p) => p.message)).toContain("rank 0: stage 0 micro-batch 3 has no backward (0B3, or 0I3 and 0W3)");
    expect(codes(validate(edited("r0 compute: 0F0", "r0 compute: 7F0 0F0")))).toContain("range");
    expect(codes(validate(edited("r0 compute: 0F0", "r0 compute: 1F9 0F0")))).toContain("range");
    const peer = validate(edited("0SEND_F0@1", "0SEND_F0@2"));
    expect(peer.problems[0]).toMatchObject({ code: "placement", message: "rank 0, step 0: 0SEND_F0@2: stage 1 runs on rank 1, not rank 2" });
    expect(codes(validate(edited("r0 compute: 0F0", "r0 compute: 1F3 0F0")))).toContain("placement");
    expect(codes(validate(edited("r0 comm: 0SEND_F0@1", "r0 comm: 0F0 0SEND_F0@1")))).toContain("stream");
  });

  it("a missing dependency edge, an edge to nothing, an action in no stream", () => {
    const noEdge: LoweredSchedule = { ...base, actions: base.actions.map((a) => (a.rank === 1 && a.action.kind === "F" && a.action.mb === 2 ? { ...a, deps: [] } : a)) };
    const v = validate(noEdge);
    expect(v.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^rank 1, step \d+: 1F2 does not depend on 1RECV_F2@0$/)]);
    const dangling: LoweredSchedule = { ...base, actions: base.actions.map((a) => (a.id === 0 ? { ...a, deps: [999] } : a)) };
    expect(validate(dangling).problems[0]!.message).toBe("rank 0, step 0: 0F0 depends on action #999, which is not another action");
    const orphan: LoweredSchedule = { ...base, streams: base.streams.map((st, r) => (r === 0 ? { ...st, compute: st.compute.slice(1) } : st)) };
    const o = validate(orphan);
    expect(o.problems[0]!.message).toBe("rank 0, never reached: 0F0 is in no stream of rank 0");
    expect(o.problems.some((p) => p.code === "deadlock" && p.message.includes("0F0, which is in no stream"))).toBe(true);
  });

  it("structural damage is reported without running the schedule", () => {
    const v = validate({ ...base, streams: base.streams.map((st) => ({ ...st, compute: [...st.compute, 0] })) });
    expect(v.problems.map((p) => p.code)).toEqual(["shape", "shape", "shape"]);
    expect(v.problems[0]!.message).toMatch(/rank 0 0F0 is listed twice/);
    expect(v.picture).toBe("");
    expect(validate({ ...base, stageRank: [0, 1] }).problems[0]!.message).toBe("placement lists 2 stages, expected 3");
  });

  it("assertValid throws with the problems and the picture; buildSchedule only returns valid schedules", () => {
    expect(() => assertValid(edited(" 1SEND_F1@2", ""))).toThrow(/schedule 1f1b is invalid:\n {2}rank 2, step 4: 2RECV_F1@1 has no matching[\s\S]*\[2RECV_F1@1\]!/);
    expect(() => assertValid(base)).not.toThrow();
    expect(buildSchedule({ schedule: "zero_bubble", ranks: 4, microBatches: 8, checkpoint: "except_last" }).actions.length).toBeGreaterThan(0);
  });

  it("a picture of a long schedule shows a window that ends just after the first offending step", () => {
    const long = lower(oneFOneBOrder({ ranks: 2, microBatches: 40 }));
    const v = validate(parseListing(long, formatListing(long).replace(" 1SEND_B30@0", "")));
    expect(v.problems[0]!.message).toMatch(/^rank 0, step \d+: 0RECV_B30@1 has no matching 1SEND_B30@0 on rank 1$/);
    const step = v.problems[0]!.step!;
    const [header, ...rows] = v.picture.split("\n");
    expect(header).toMatch(/^step +\| … \d/);
    const columns = header!.split("|")[1]!.trim().split(/\s+/).filter((c) => c !== "…").map(Number);
    expect(columns).toHaveLength(24);
    expect(columns).toContain(step);
    expect(columns.at(-1)! - step).toBeLessThanOrEqual(3);
    expect(rows).toHaveLength(4);
    expect(rows.find((r) => r.startsWith("r0 comm"))).toContain("[0RECV_B30@1]!");
  });
});
