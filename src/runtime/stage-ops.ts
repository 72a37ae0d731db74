// Which training-graph ops each compute action of a stage runs: F (and R, its recompute) the forward ops of
// the stage's layers, I the input-gradient ops, W the weight-gradient ops, B both. Also checks statically that
// a stage's ops read only what the stage can have: its own results, the tensors its plan says cross into it,
// gradients coming back across its output cut, model inputs, parameters and optimizer state.
import type { Graph, OpNode, TensorId } from "../graph/graph.js";
import type { PlanStage } from "../plan/plan.js";

export interface StageOps {
  readonly forward: readonly OpNode[];
  readonly backwardInput: readonly OpNode[];
  readonly backwardWeight: readonly OpNode[];
}

export function stageOps(g: Graph, stages: readonly PlanStage[]): StageOps[] {
  const stageOfLayer = new Array<number>(g.layers().length).fill(-1);
  for (const s of stages) for (let l = s.layers[0]; l <= s.layers[1]; l++) stageOfLayer[l] = s.index;
  const out = stages.map(() => ({ forward: [] as OpNode[], backwardInput: [] as OpNode[], backwardWeight: [] as OpNode[] }));
  for (const o of g.ops()) {
    const s = stageOfLayer[o.layer]!;
    if (s < 0) throw new Error(`internal: layer ${o.layer} is on no stage`);
    if (o.phase === "forward") out[s]!.forward.push(o);
    else if (o.phase === "backward") out[s]!.backwardInput.push(o);
    else if (o.phase === "weight_grad") out[s]!.backwardWeight.push(o);
  }
  return out;
}

/** Throws when an op of some stage reads a tensor the plan gives that stage no way to have. */
export function checkStageOps(g: Graph, stages: readonly PlanStage[], ops: readonly StageOps[]): void {
  const producedOn = new Map<TensorId, number>();
  ops.forEach((s, k) => {
    for (const o of [...s.forward, ...s.backwardInput, ...s.backwardWeight]) for (const t of o.outputs) producedOn.set(t, k);
  });
  // Forward tensors received from earlier stages (their sends), and the gradients of this stage's own sends
  // coming back from later stages.
  ops.forEach((s, k) => {
    const received = new Set<TensorId>();
    for (let j = 0; j < k; j++) for (const t of stages[j]!.sends) received.add(t);
    for (const o of [...s.forward, ...s.backwardInput, ...s.backwardWeight]) {
      for (const t of o.inputs) {
        const kind = g.tensor(t).kind;
        if (kind === "input" || kind === "param" || kind === "state") continue;
        const from = producedOn.get(t);
        if (from === k) continue;
        if (o.phase === "forward" ? received.has(t) : from !== undefined && (from > k || received.has(t))) continue;
        throw new Error(`internal: stage ${k}'s ${o.phase} op ${o.id} (${o.op}) reads %${t} '${g.tensor(t).name}' from stage ${from ?? "?"}, which the plan never sends it`);
      }
    }
  });
}
