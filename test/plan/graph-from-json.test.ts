// A plan's graph is enough to rebuild the training graph: every sample's training graph survives the round
// trip graph → JSON → graph → JSON unchanged, and the rebuilt graph trains exactly like the original.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { dimToString } from "../../src/graph/dim.js";
import { dimFromString, graphFromJson } from "../../src/plan/graph-from-json.js";
import { graphToJson } from "../../src/plan/graph-json.js";
import { PlanError } from "../../src/plan/plan-error.js";
import { TrainingSession } from "../../src/interp/session.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { samplePath } from "../compile/helpers.js";

describe("graphFromJson", () => {
  for (const name of ["mlp", "gpt-tiny", "gpt2-124m", "llama-7b", "gpt3-175b"] as const) {
    it(`${name}: graph → JSON → graph → JSON is the identity`, () => {
      const model = checkFile(samplePath(name), {}).model!;
      const training = buildTrainingGraph(model.graph, model.train!);
      const json = graphToJson(training);
      const again = graphFromJson(training.model, json);
      expect(graphToJson(again)).toEqual(json);
      expect(again.parameterCount()).toBe(training.parameterCount());
    });
  }

  it("the rebuilt graph trains exactly like the original (gpt-tiny, 3 steps)", () => {
    const model = checkFile(samplePath("gpt-tiny"), {}).model!;
    const training = buildTrainingGraph(model.graph, model.train!);
    const rebuilt = graphFromJson(training.model, graphToJson(training));
    const a = new TrainingSession(training, { seed: 3 });
    const b = new TrainingSession(rebuilt, { seed: 3 });
    const data = syntheticData(training, { batch: 8, seq: 16, seed: 1 });
    for (let step = 0; step < 3; step++) {
      const batch = data.batch(step);
      expect(b.step(batch).loss).toBe(a.step(batch).loss);
    }
  });

  it("dims round-trip through their text form; bad text is a PlanError", () => {
    for (const t of ["768", "B", "B*S", "4*B*S", "S^2", "2*B*S^2"]) expect(dimToString(dimFromString(t))).toBe(t);
    expect(() => dimFromString("Q")).toThrow(PlanError);
    expect(() => dimFromString("B+S")).toThrow(PlanError);
  });
});
