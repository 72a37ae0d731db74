// The executable specification of `fsm run`: one training step of a plan computed in-process with the
// reference interpreter's kernels, action by action in the plan's predicted order, on every data-parallel
// replica and micro-batch. Gradients are summed over each replica's micro-batches as they finish, then over
// replicas, and averaged (the losses are means, as DDP averages), then the graph's optimizer ops run once on the averaged gradients. A plan for N
// devices must give what the 1-device plan and the reference interpreter's full-batch step give; the native
// runtime is checked against this, action by action.
import type { Graph, TensorId } from "../graph/graph.js";
import { numel } from "../graph/dim.js";
import type { Plan } from "../plan/plan.js";
import { concreteShape, runOps } from "../interp/run.js";
import { floatArray, floats, type FloatArray, type FloatKind, type FloatTensor, type Tensor } from "../interp/tensor.js";
import type { Batch } from "../interp/session.js";
import type { Kernel } from "../interp/kernels/kernel.js";
import { computeSteps, type ComputeStep } from "../lower/stage-ops.js";

export interface ReferenceState {
  readonly params: Map<string, FloatTensor>;
  readonly state: Map<string, FloatTensor>;
}

export interface ReferenceStepResult {
  /** Mean of the micro-batch losses over every replica. */
  readonly loss: number;
  /** Compute actions run (every replica counted). */
  readonly computeActions: number;
}

/** Rows [from, from + count) of every batch tensor (model inputs have the batch dimension first). */
export function sliceBatch(batch: Batch, from: number, count: number): Batch {
  const out: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(batch)) {
    const row = t.shape.slice(1).reduce((a, b) => a * b, 1);
    out[name] = { shape: [count, ...t.shape.slice(1)], data: t.data.slice(from * row, (from + count) * row) } as Tensor;
  }
  return out;
}

export class ReferenceExecutor {
  private readonly steps: readonly ComputeStep[];

  constructor(
    private readonly plan: Plan,
    private readonly graph: Graph,
    private readonly float: FloatKind = "f32",
    /** The kernels ops run with (default: the interpreter's). */
    private readonly kernels?: (op: string) => Kernel,
  ) {
    this.steps = computeSteps(graph, plan);
  }

  step(s: ReferenceState, batch: Batch): ReferenceStepResult {
    const g = this.graph;
    const { dataParallel: dp, microBatches: m, microBatchSize: mbs } = this.plan.settings;
    const bindings = this.plan.settings.seq === null ? { B: mbs } : { B: mbs, S: this.plan.settings.seq };
    // One value store per (replica, micro-batch), shared by its stages: a send is the next stage reading it.
    const values: Map<TensorId, Tensor>[][] = [];
    for (let r = 0; r < dp; r++) {
      values.push([]);
      for (let j = 0; j < m; j++) {
        const v = new Map<TensorId, Tensor>();
        const rows = sliceBatch(batch, (r * m + j) * mbs, mbs);
        for (const t of g.inputs()) {
          const name = g.tensor(t).name;
          if (!rows[name]) throw new Error(`the batch has no value for input '${name}'`);
          v.set(t, rows[name]!);
        }
        for (const p of g.params()) v.set(p.tensor, s.params.get(p.name)!);
        values[r]!.push(v);
      }
    }
    // Per replica, each parameter gradient summed over micro-batches as they finish (in execution order), so
    // only one accumulator per replica lives through the step; the native program does the same.
    const gradTensors = new Set([...g.paramGrads().values()]);
    const acc: Map<TensorId, FloatArray>[] = Array.from({ length: dp }, () => new Map());
    let computeActions = 0;
    for (const { ops: list, mb } of this.steps) {
      for (let r = 0; r < dp; r++) {
        const v = values[r]![mb]!;
        runOps(g, list, v, { bindings, float: this.float, ...(this.kernels && { kernels: this.kernels }) });
        computeActions++;
        for (const o of list) {
          for (const t of o.outputs) {
            if (!gradTensors.has(t)) continue;
            const x = floats(v.get(t)!);
            const sum = acc[r]!.get(t);
            if (!sum) acc[r]!.set(t, x.slice());
            else for (let i = 0; i < x.length; i++) sum[i]! += x[i]!;
          }
        }
      }
    }
    // Σ over micro-batches and replicas, ÷ their count: the full batch's mean-loss gradient.
    const scale = 1 / (dp * m);
    const grads = new Map<TensorId, Tensor>();
    for (const t of gradTensors) {
      const size = numel(g.tensor(t).type.shape);
      const sum = floatArray(this.float, size);
      for (const a of acc) {
        const x = a.get(t);
        if (!x) throw new Error(`internal: gradient %${t} was never computed`);
        for (let i = 0; i < size; i++) sum[i]! += x[i]!;
      }
      for (let i = 0; i < size; i++) sum[i]! *= scale;
      grads.set(t, { shape: concreteShape(g.tensor(t).type.shape, bindings), data: sum });
    }
    let loss = 0;
    for (const row of values) for (const v of row) loss += floats(v.get(g.loss!)!)[0]!;
    // The optimizer phase on the averaged gradients, with the parameters and state it updates.
    const opt = new Map<TensorId, Tensor>(grads);
    for (const p of g.params()) opt.set(p.tensor, s.params.get(p.name)!);
    for (const st of g.states()) opt.set(st.tensor, s.state.get(st.name)!);
    runOps(g, g.ops().filter((o) => o.phase === "optimizer"), opt, { bindings, float: this.float, ...(this.kernels && { kernels: this.kernels }) });
    for (const [target, value] of g.updates()) {
      const info = g.tensor(target);
      (info.kind === "param" ? s.params : s.state).set(info.name, opt.get(value)! as FloatTensor);
    }
    return { loss: loss * scale, computeActions };
  }
}
