// Test helpers for passes: compile a sample with the checker and build its training graph.
import { join } from "node:path";
import { checkFile, type CheckedModel } from "../../src/check/check.js";
import type { Graph } from "../../src/graph/graph.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";

export const SAMPLES = join(import.meta.dirname, "..", "..", "samples");

/** The checked model of samples/<name>.fsm; throws with the diagnostics when it does not check. */
export function checkSample(name: string): CheckedModel {
  const r = checkFile(join(SAMPLES, `${name}.fsm`));
  if (!r.model) throw new Error(`${name}.fsm does not check: ${r.diagnostics.map((d) => d.message).join("; ")}`);
  return r.model;
}

/** The forward and training graphs of a sample (with its own train settings). */
export function trainSample(name: string): { forward: Graph; training: Graph; model: CheckedModel } {
  const model = checkSample(name);
  if (!model.train) throw new Error(`${name}.fsm has no train section`);
  return { forward: model.graph, training: buildTrainingGraph(model.graph, model.train), model };
}
