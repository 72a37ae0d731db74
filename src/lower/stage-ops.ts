// Which training-graph ops each compute action of a stage runs: F (and R, its recompute) the forward ops of
// the stage's layers, I the input-gradient ops, W the weight-gradient ops, B both. Also checks statically that
// a stage's ops read only what the stage can have: its own results, the tensors its plan says cross into it,
// gradients coming back across its output cut, model inputs, parameters and optimizer state.
import type { Graph, OpNode, TensorId } from "../graph/graph.js";
import type { Plan, PlanStage } from "../plan/plan.js";
import { actionFromText } from "../schedule/action.js";

export interface StageOps {
  readonly forward: readonly OpNode[];
  readonly backwardInput: readonly OpNode[];
  readonly backwardWeight: readonly OpNode[];
  /** Both, in graph order (each weight gradient right after the input gradient it reads): what an unsplit
   *  backward (B) runs, so an activation gradient dies as soon as its layer is done instead of waiting for
   *  every weight gradient at the end. */
  readonly backward: readonly OpNode[];
}

export function stageOps(g: Graph, stages: readonly PlanStage[]): StageOps[] {
  const stageOf = stageOfOp(g, stages);
  const out = stages.map(() => ({ forward: [] as OpNode[], backwardInput: [] as OpNode[], backwardWeight: [] as OpNode[], backward: [] as OpNode[] }));
  for (const o of g.ops()) {
    const s = stageOf(o);
    if (o.phase === "forward") out[s]!.forward.push(o);
    else if (o.phase === "backward") out[s]!.backwardInput.push(o);
    else if (o.phase === "weight_grad") out[s]!.backwardWeight.push(o);
    if (o.phase === "backward" || o.phase === "weight_grad") out[s]!.backward.push(o);
  }
  return out;
}

/** How many ops each list of stageOps would hold, without the lists (the arena budget's estimate: a deep
 *  single-stage plan's lists hold every op of the training graph). */
export function stageOpCounts(g: Graph, stages: readonly PlanStage[]): { [K in keyof StageOps]: number }[] {
  const stageOf = stageOfOp(g, stages);
  const out = stages.map(() => ({ forward: 0, backwardInput: 0, backwardWeight: 0, backward: 0 }));
  for (const o of g.ops()) {
    const n = out[stageOf(o)]!;
    if (o.phase === "forward") n.forward++;
    else if (o.phase === "backward") n.backwardInput++;
    else if (o.phase === "weight_grad") n.backwardWeight++;
    if (o.phase === "backward" || o.phase === "weight_grad") n.backward++;
  }
  return out;
}

/** The stage of an op, by its layer (throws for a layer on no stage). */
function stageOfOp(g: Graph, stages: readonly PlanStage[]): (o: OpNode) => number {
  const stageOfLayer = new Array<number>(g.layers().length).fill(-1);
  for (const s of stages) for (let l = s.layers[0]; l <= s.layers[1]; l++) stageOfLayer[l] = s.index;
  return (o) => {
    const s = stageOfLayer[o.layer]!;
    if (s < 0) throw new Error(`internal: layer ${o.layer} is on no stage`);
    return s;
  };
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

/** A compute action of the plan that runs graph ops: its text form, stage, micro-batch and ops in order. */
export interface ComputeStep {
  readonly text: string;
  readonly stage: number;
  readonly mb: number;
  readonly ops: readonly OpNode[];
}

/**
 * Every program's compute actions in the plan's predicted start order (ties by end, program, position) — a
 * single order consistent with every dependency — each with the ops it runs: F the forward, I/W/B the input
 * gradients, the weight gradients or both (in graph order). R (recompute) runs nothing here: executors that keep every
 * value have nothing to redo. Checks the stage slices against the plan's sends first.
 */
export function computeSteps(g: Graph, plan: Plan): ComputeStep[] {
  const ops = stageOps(g, plan.stages);
  checkStageOps(g, plan.stages, ops);
  const all = plan.programs.flatMap((p) => p.actions.map((a, i) => ({ program: p.id, index: i, text: a.text, start: a.start, end: a.end })));
  all.sort((a, b) => a.start - b.start || a.end - b.end || a.program - b.program || a.index - b.index);
  const out: ComputeStep[] = [];
  for (const { text } of all) {
    const a = actionFromText(text);
    if (a.mb === undefined) continue;
    const st = ops[a.stage]!;
    const list = a.kind === "F" ? st.forward : a.kind === "I" ? st.backwardInput : a.kind === "W" ? st.backwardWeight : a.kind === "B" ? st.backward : undefined;
    if (list !== undefined) out.push({ text, stage: a.stage, mb: a.mb, ops: list });
  }
  return out;
}
