// The schedule check: the programs obey the schedule rules, refused at the offending action, in the plan's ranks.
import { describe, expect, it } from "vitest";
import { checkSchedule, inPlanRanks } from "../../src/verify/check-schedule.js";
import { edited, fsdpPlan, refusal, textIndex, type Mutable } from "../plan/plan-edits.js";

describe("checkSchedule", () => {
  it("accepts a compiled plan", () => expect(() => checkSchedule(fsdpPlan)).not.toThrow());

  const cases: [string, (p: Mutable) => void, (p: Mutable) => string, RegExp][] = [
    [
      "a backward before its forward",
      (p) => {
        const c = p.programs[0].streams.compute as number[];
        const b = textIndex(p, 0, "0B0");
        c.splice(c.indexOf(b), 1);
        c.unshift(b);
      },
      (p) => `programs[0].actions[${textIndex(p, 0, "0B0")}]`,
      /^rank 0 0B0 comes before its forward 0F0/,
    ],
    [
      "a wait cycle across streams",
      (p) => p.programs[0].actions[textIndex(p, 0, "0F0")].deps.push(textIndex(p, 0, "0SEND_F0@2")),
      () => "",
      /^wait cycle: rank 0 compute 0F0 waits for rank 0 0SEND_F0@2/,
    ],
    [
      "a SEND to the wrong peer (in the plan's ranks)",
      (p) => (p.programs[0].actions[textIndex(p, 0, "0SEND_F1@2")].text = "0SEND_F1@0"),
      (p) => `programs[0].actions[${textIndex(p, 0, "0SEND_F1@0")}]`,
      /^0SEND_F1@0: stage 1 runs on rank 2, not rank 0/,
    ],
    [
      "a SEND to a replica that is not replica 0",
      (p) => (p.programs[0].actions[textIndex(p, 0, "0SEND_F1@2")].text = "0SEND_F1@3"),
      (p) => `programs[0].actions[${textIndex(p, 0, "0SEND_F1@3")}].text`,
      /not a replica-0 rank/,
    ],
    [
      "a RECV whose SEND is gone",
      (p) => (p.programs[1].actions[textIndex(p, 1, "1RECV_F1@0")].text = "1RECV_F3@0"),
      () => "",
      /has no matching|outside the pipeline/,
    ],
    [
      "a tied all-reduce of no tied weight",
      (p) => (p.programs[0].actions[textIndex(p, 0, "0ALL_REDUCE0u0")].text = "0ALL_REDUCE0u5"),
      (p) => `programs[0].actions[${textIndex(p, 0, "0ALL_REDUCE0u5")}].text`,
      /stage 0 has no tied weight with unit 5/,
    ],
    [
      "members of a tied all-reduce that disagree on bytes",
      (p) => (p.programs[1].actions[textIndex(p, 1, "1ALL_REDUCE0u0")].collective.bytes = 1),
      () => "",
      /disagree on bytes/,
    ],
  ];
  for (const [what, edit, path, message] of cases) {
    it(`refuses ${what}`, () => {
      const plan = edited(fsdpPlan, edit);
      const e = refusal(() => checkSchedule(plan));
      const want = path(plan as Mutable);
      if (want !== "") expect(e.path).toBe(want);
      else expect(e.path).toMatch(/^programs\[\d\]\.actions\[\d+\]$/);
      expect(e.reason).toMatch(message);
    });
  }

  it("refuses a missing backward at its program", () => {
    const plan = edited(fsdpPlan, (p) => (p.programs[1].actions[textIndex(p, 1, "1B1")].text = "1F3"));
    expect(refusal(() => checkSchedule(plan)).message).toMatch(/^programs\[1\]/);
  });

  it("writes pipeline ranks as the plan's replica-0 ranks", () => {
    expect(inPlanRanks("0SEND_F1@1: stage 1 runs on rank 1, not rank 0", 4)).toBe("0SEND_F1@4: stage 1 runs on rank 4, not rank 0");
    expect(inPlanRanks("never entered by rank 1 of group [0,1]", 2)).toBe("never entered by rank 2 of group [0,2]");
    expect(inPlanRanks("rank 3 waits", 1)).toBe("rank 3 waits");
  });
});
