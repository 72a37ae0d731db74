// The placement check: stages, shard groups and programs agree with the mesh on ranks, stages and layers.
import { describe, expect, it } from "vitest";
import { checkPlacement } from "../../src/verify/check-placement.js";
import { edited, fsdpPlan, refusal, type Mutable } from "../plan/plan-edits.js";

describe("checkPlacement", () => {
  it("accepts a compiled plan", () => expect(() => checkPlacement(fsdpPlan)).not.toThrow());

  const cases: [string, (p: Mutable) => void, string, RegExp][] = [
    ["a program's ranks reordered", (p) => (p.programs[1].ranks = [3, 2]), "programs[1].ranks", /expected \[2, 3\], the replicas of pipeline rank 1 .* got \[3, 2\]/],
    ["a program's ranks of another pipeline rank", (p) => (p.programs[0].ranks = [2, 3]), "programs[0].ranks", /expected \[0, 1\]/],
    ["a program running another rank's stage", (p) => (p.programs[0].stages = [1]), "programs[0].stages", /expected \[0\]/],
    ["a program's pipeline rank", (p) => (p.programs[1].pipeRank = 0), "programs[1].pipeRank", /runs pipeline rank 1, not 0/],
    ["a stage on another pipeline rank", (p) => (p.stages[1].pipeRank = 0), "stages[1].pipeRank", /pipeline rank 1 .* not 0/],
    ["a stage's ranks", (p) => (p.stages[0].ranks = [0, 2]), "stages[0].ranks", /expected \[0, 1\]/],
    ["a shard group unlike its stage", (p) => (p.shard[1].ranks = [2, 1]), "shard[1].ranks", /expected \[2, 3\], the ranks of stage 1/],
    ["a gap between stages' layers", (p) => (p.stages[1].layers[0] += 1), "stages[1].layers[0]", /must start at layer 3/],
    ["a last stage short of the model", (p) => (p.stages[1].layers[1] -= 1), "stages[1].layers[1]", /must end at the model's last layer 5, not 4/],
  ];
  for (const [what, edit, path, message] of cases) {
    it(`refuses ${what}`, () => {
      const e = refusal(() => checkPlacement(edited(fsdpPlan, edit)));
      expect(e.path).toBe(path);
      expect(e.reason).toMatch(message);
    });
  }
});
