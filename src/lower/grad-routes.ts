// Where each stage's parameter gradients come from once a step is split over devices. A parameter used by
// one stage gets its graph gradient there. A tied parameter (wte used again by lm_head on a later stage) has
// a gradient that the training graph sums from partials made on different stages; on devices each holder
// stage keeps its own partial (the sum of its leaves of that tree) and the plan's tied all-reduce adds the
// partials, so the graph's cross-stage sum ops are not run on any stage.
import type { Graph, OpId, OpNode, TensorId } from "../graph/graph.js";
import type { PlanStage } from "../plan/plan.js";
import { checkStageOps, stageOps, type StageOps } from "./stage-ops.js";

export interface GradRoutes {
  /** Per stage: its op slices with the tied gradients' cross-stage sum ops removed. */
  readonly ops: readonly StageOps[];
  /** Per stage: the parameters its forward reads (by name), in first-use order. */
  readonly params: readonly (readonly string[])[];
  /** Per stage: gradient tensor produced there → the parameter it is (part of) the gradient of. */
  readonly contributions: readonly ReadonlyMap<TensorId, string>[];
  /** Per stage: parameter → how many of its gradient partials the stage makes (1 unless a tied weight is
   *  used twice there). */
  readonly partials: readonly ReadonlyMap<string, number>[];
  /** Every tensor of a parameter gradient's sum tree (the gradient, the partials it adds up and the partial
   *  sums between): parameter gradients are fp32 whatever the plan's precision, so a partial is never
   *  rounded to 16 bits before it is summed. */
  readonly gradTensors: ReadonlySet<TensorId>;
  /** Parameters read by more than one stage → those stages, ascending. */
  readonly holders: ReadonlyMap<string, readonly number[]>;
  /** Per stage: the gradients its backward reads from the next stage, in first-read order (what SEND_B of
   *  the next stage carries back). */
  readonly gradsBack: readonly (readonly TensorId[])[];
}

/** The leaves of a gradient's sum tree: through `add` ops of the weight_grad phase to what they add. Every
 *  tensor met on the way (leaves included) goes into `tensors`. */
function sumLeaves(g: Graph, t: TensorId, tree: Set<OpId>, tensors: Set<TensorId>): TensorId[] {
  tensors.add(t);
  const p = g.tensor(t).producer;
  if (p === undefined) return [t];
  const o = g.op(p);
  if (o.op !== "add" || o.phase !== "weight_grad") return [t];
  tree.add(o.id);
  return o.inputs.flatMap((x) => sumLeaves(g, x, tree, tensors));
}

export function gradRoutes(g: Graph, stages: readonly PlanStage[]): GradRoutes {
  const sliced = stageOps(g, stages);
  checkStageOps(g, stages, sliced);
  const stageOfOp = new Map<OpId, number>();
  sliced.forEach((s, k) => {
    for (const o of [...s.forward, ...s.backwardInput, ...s.backwardWeight]) stageOfOp.set(o.id, k);
  });
  const params = sliced.map((s) => {
    const seen = new Set<string>();
    for (const o of s.forward) for (const t of o.inputs) if (g.tensor(t).kind === "param") seen.add(g.tensor(t).name);
    return [...seen];
  });
  const holders = new Map<string, number[]>();
  params.forEach((list, k) => list.forEach((p) => holders.set(p, [...(holders.get(p) ?? []), k])));
  const contributions = sliced.map(() => new Map<TensorId, string>());
  const tree = new Set<OpId>();
  const gradTensors = new Set<TensorId>();
  for (const [name, grad] of g.paramGrads()) {
    const on = holders.get(name) ?? [];
    if (on.length === 0) throw new Error(`internal: parameter '${name}' is read by no stage`);
    if (on.length === 1) {
      contributions[on[0]!]!.set(grad, name);
      // On one stage the graph's own sum ops run (none are dropped), but their operands are still gradients.
      sumLeaves(g, grad, new Set(), gradTensors);
      continue;
    }
    for (const leaf of sumLeaves(g, grad, tree, gradTensors)) {
      const k = stageOfOp.get(g.tensor(leaf).producer!);
      if (k === undefined || !on.includes(k)) throw new Error(`internal: a gradient partial of tied '${name}' is made on stage ${k ?? "?"}, which does not hold it`);
      contributions[k]!.set(leaf, name);
    }
  }
  for (const [name, on] of [...holders]) if (on.length === 1) holders.delete(name);
  const drop = (list: readonly OpNode[]): OpNode[] => list.filter((o) => !tree.has(o.id));
  const ops = sliced.map((s) => ({ forward: s.forward, backwardInput: drop(s.backwardInput), backwardWeight: drop(s.backwardWeight), backward: drop(s.backward) }));
  const gradsBack = ops.map((s, k) => {
    const out: TensorId[] = [];
    for (const o of s.backward) {
      for (const t of o.inputs) {
        const p = g.tensor(t).producer;
        if (p === undefined || g.op(p).phase === "forward" || out.includes(t)) continue;
        const from = stageOfOp.get(p)!;
        if (from === k) continue;
        if (from !== k + 1) throw new Error(`not implemented: stage ${k} reads gradient %${t} from stage ${from}; only the next stage's gradients travel back`);
        out.push(t);
      }
    }
    return out;
  });
  const partials = contributions.map((c) => {
    const n = new Map<string, number>();
    for (const p of c.values()) n.set(p, (n.get(p) ?? 0) + 1);
    return n;
  });
  return { ops, params, contributions, partials, gradTensors, holders, gradsBack };
}
