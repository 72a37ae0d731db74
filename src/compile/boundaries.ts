// What crosses stage boundaries in the training graph: the forward tensors each cut carries (their gradients
// travel back) and what each stage holds as its input. (Weights read on several stages are src/shard's: every
// holder keeps a replica and a tied all-reduce sums their gradients.)
import type { Graph, TensorId } from "../graph/graph.js";
import type { StageAssignment } from "./stages.js";

export interface Boundaries {
  /** Per stage k: forward tensors produced on stages ≤ k and read on stages > k (empty for the last). */
  readonly sends: readonly (readonly TensorId[])[];
  /** Per stage: what it keeps as its input: tensors sent into it plus the model inputs it reads (the data
   *  loader feeds model inputs to every stage; they never travel). */
  readonly inputs: readonly (readonly TensorId[])[];
}

export function findBoundaries(training: Graph, stages: readonly StageAssignment[]): Boundaries {
  const layerStage = new Array<number>(training.layers().length).fill(-1);
  for (const s of stages) for (let l = s.start; l < s.end; l++) layerStage[l] = s.index;
  const sends = stages.map(() => new Set<TensorId>());
  const modelInputs = stages.map(() => new Set<TensorId>());
  for (const o of training.ops()) {
    if (o.phase !== "forward") continue;
    const at = layerStage[o.layer]!;
    for (const t of o.inputs) {
      const info = training.tensor(t);
      if (info.kind === "input") modelInputs[at]!.add(t);
      else if (info.producer !== undefined) {
        const from = layerStage[training.op(info.producer).layer]!;
        for (let k = from; k < at; k++) sends[k]!.add(t);
      }
    }
  }
  const sorted = (s: Set<TensorId>) => [...s].sort((a, b) => a - b);
  return {
    sends: sends.map(sorted),
    inputs: stages.map((_, k) => sorted(new Set([...(k > 0 ? sends[k - 1]! : []), ...modelInputs[k]!]))),
  };
}
