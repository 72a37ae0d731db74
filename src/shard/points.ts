// Step points the shard collectives hang on, built in one place so every strategy names them alike.
import type { Phase } from "../graph/graph.js";
import type { StepPoint } from "./types.js";

export function before(phase: Phase, layer: number, microBatch: StepPoint["microBatch"]): StepPoint {
  return { when: "before", phase, layer, microBatch };
}

export function after(phase: Phase, layer: number, microBatch: StepPoint["microBatch"]): StepPoint {
  return { when: "after", phase, layer, microBatch };
}

/** The step's single optimizer pass counts as the `last` micro-batch's: it runs after every gradient. */
export function afterOptimizer(layer: number): StepPoint {
  return after("optimizer", layer, "last");
}

export function formatPoint(p: StepPoint): string {
  const mb = p.microBatch === "each" ? "each micro-batch" : p.phase === "optimizer" ? "the step" : `the ${p.microBatch} micro-batch`;
  return `${p.when} ${p.phase} of layer ${p.layer}, ${mb}`;
}
