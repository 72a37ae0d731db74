// One device's training loop over a training graph: holds parameters and optimizer state, runs forward,
// backward and optimizer ops on a batch, and applies the graph's updates (new values replace the leaves).
import type { Graph, OpNode, Phase, TensorId } from "../graph/graph.js";
import { numel } from "../graph/dim.js";
import { initParams } from "./init.js";
import { bindDims, runOps } from "./run.js";
import { floatArray, floats, toKind, type FloatKind, type FloatTensor, type Tensor } from "./tensor.js";

/** Model inputs by name (e.g. tokens, targets). */
export type Batch = Readonly<Record<string, Tensor>>;

export interface SessionOptions {
  /** Element type of every float tensor in the run (default f32; f64 for gradient checks). */
  readonly float?: FloatKind;
  /** Seed of the parameter initialization (default 0); ignored when `params` is given. */
  readonly seed?: number;
  /** Initial parameters by canonical name (copied, converted to `float`). */
  readonly params?: ReadonlyMap<string, Tensor>;
}

export interface StepResult {
  /** The loss of the batch before the update. */
  readonly loss: number;
  /** The global gradient norm before clipping, when the graph clips. */
  readonly gradNorm?: number;
}

/** Phases a gradient computation runs, and a whole step. */
export const GRADIENT_PHASES: readonly Phase[] = ["forward", "backward", "weight_grad"];
export const PHASES: readonly Phase[] = [...GRADIENT_PHASES, "optimizer"];

export class TrainingSession {
  readonly float: FloatKind;
  readonly params = new Map<string, FloatTensor>();
  readonly state = new Map<string, FloatTensor>();

  constructor(readonly graph: Graph, options: SessionOptions = {}) {
    this.float = options.float ?? "f32";
    const init = options.params ?? initParams(graph, options.seed ?? 0, this.float);
    for (const p of graph.params()) {
      const t = init.get(p.name);
      if (!t) throw new Error(`no initial value for parameter '${p.name}'`);
      this.params.set(p.name, toKind(t, this.float));
    }
    for (const s of graph.states()) {
      this.state.set(s.name, { shape: s.type.shape.map((d) => numel([d])), data: floatArray(this.float, numel(s.type.shape)) });
    }
  }

  /** Forward only: the loss of a batch. */
  loss(batch: Batch): number {
    const values = this.run(batch, ["forward"]);
    return floats(values.get(this.graph.loss!)!)[0]!;
  }

  /** Forward, backward and weight gradients, no update: the loss and each parameter's gradient. */
  gradients(batch: Batch): { loss: number; grads: Map<string, FloatTensor> } {
    return this.gradientsOf(this.run(batch, GRADIENT_PHASES));
  }

  /** A whole training step: every op, then each updated parameter and state takes its new value. */
  step(batch: Batch): StepResult {
    return this.apply(this.run(batch, PHASES));
  }

  /** The loss and each parameter's gradient among the values of a run of GRADIENT_PHASES. */
  gradientsOf(values: ReadonlyMap<TensorId, Tensor>): { loss: number; grads: Map<string, FloatTensor> } {
    const grads = new Map<string, FloatTensor>();
    for (const [name, t] of this.graph.paramGrads()) grads.set(name, values.get(t)! as FloatTensor);
    return { loss: floats(values.get(this.graph.loss!)!)[0]!, grads };
  }

  /** After a run of every phase: each updated parameter and state takes its new value. */
  apply(values: ReadonlyMap<TensorId, Tensor>): StepResult {
    for (const [target, value] of this.graph.updates()) {
      const info = this.graph.tensor(target);
      (info.kind === "param" ? this.params : this.state).set(info.name, values.get(value)! as FloatTensor);
    }
    const norm = this.graph.ops().find((o) => o.op === "global_norm");
    const loss = floats(values.get(this.graph.loss!)!)[0]!;
    return norm ? { loss, gradNorm: floats(values.get(norm.outputs[0]!)!)[0]! } : { loss };
  }

  /** Runs the ops of the given phases in graph order and returns every value. */
  private run(batch: Batch, phases: readonly Phase[]): Map<TensorId, Tensor> {
    const values = this.leaves(batch);
    runOps(this.graph, this.opsOf(phases), values, { bindings: bindDims(this.graph, batch), float: this.float });
    return values;
  }

  /** The graph's ops of the given phases, in order. */
  opsOf(phases: readonly Phase[]): OpNode[] {
    return this.graph.ops().filter((o) => phases.includes(o.phase));
  }

  /** The values a run starts from: the batch's inputs, the parameters and the optimizer state. */
  leaves(batch: Batch): Map<TensorId, Tensor> {
    if (this.graph.loss === undefined) throw new Error(`graph '${this.graph.model}' has no loss`);
    const values = new Map<TensorId, Tensor>();
    for (const t of this.graph.inputs()) {
      const info = this.graph.tensor(t);
      const v = batch[info.name];
      if (!v) throw new Error(`the batch has no value for input '${info.name}'`);
      values.set(t, v.data instanceof Int32Array ? v : toKind(v, this.float));
    }
    for (const p of this.graph.params()) values.set(p.tensor, this.params.get(p.name)!);
    for (const s of this.graph.states()) values.set(s.tensor, this.state.get(s.name)!);
    return values;
  }
}
