// Test helpers for the interpreter: tiny graphs around one op, random parameters, and a finite-difference
// check of every gradient a training graph computes (float64).
import { expect } from "vitest";
import type { TrainConfig } from "../../src/check/settings-types.js";
import { dim } from "../../src/graph/dim.js";
import { Graph, type TensorId } from "../../src/graph/graph.js";
import { isOpCheckError } from "../../src/graph/op-def.js";
import { getOp } from "../../src/graph/registry.js";
import type { Attrs, DType } from "../../src/graph/types.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { Rng } from "../../src/interp/random.js";
import { TrainingSession, type Batch } from "../../src/interp/session.js";
import type { FloatTensor, Tensor } from "../../src/interp/tensor.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { emit } from "../graph/helpers.js";

/** Plain SGD without clipping: training graphs whose optimizer step the gradient tests do not run. */
export const PLAIN_SGD: TrainConfig = {
  batch: 2,
  steps: 1,
  seed: 1,
  optimizer: { kind: "sgd", lr: 0.1, momentum: 0, weightDecay: 0, nesterov: false },
  precision: "fp32",
  reduceDtype: "fp32",
  lossScale: "dynamic",
  data: { kind: "synthetic" },
};

/** Builds a small forward graph: parameters used directly as operands of function ops (so input gradients are
 *  checked as parameter gradients), module ops with their own parameters, i32 inputs with fixed values. */
export class CaseBuilder {
  readonly g = new Graph("case");
  readonly batch: Record<string, Tensor> = {};
  /** Per parameter: how to draw its elements (default N(0, 1)). */
  readonly draw = new Map<string, (r: Rng) => number>();
  private readonly layer = this.g.addLayer("main");
  private n = 0;

  param(dims: number[], draw?: (r: Rng) => number): TensorId {
    const name = `p${this.n++}`;
    if (draw) this.draw.set(name, draw);
    return this.g.addParam({ name, type: { dtype: "f32", shape: dims.map(dim) }, init: "normal", layer: this.layer, scope: "" });
  }

  ints(name: string, dims: number[], values: number[]): TensorId {
    this.batch[name] = { shape: dims, data: Int32Array.from(values) };
    return this.g.addInput(name, { dtype: "i32" as DType, shape: dims.map(dim) });
  }

  floats(name: string, dims: number[], values: number[]): TensorId {
    this.batch[name] = { shape: dims, data: Float64Array.from(values) };
    return this.g.addInput(name, { dtype: "f32", shape: dims.map(dim) });
  }

  /** A function op (no parameters of its own). */
  fn(op: string, inputs: TensorId[], attrs: Attrs = {}): TensorId {
    const def = getOp(op)!;
    const t = def.infer(inputs.map((i) => this.g.tensor(i).type), attrs);
    if (isOpCheckError(t)) throw new Error(t.message);
    return this.g.addOp({ op, attrs, inputs, outputTypes: [t], scope: "", layer: this.layer })[0]!;
  }

  /** A module op; its parameters are named `<scope>.<name>` and drawn N(0, 1) like the others. */
  module(op: string, inputs: TensorId[], attrs: Attrs, scope: string): TensorId {
    return emit(this.g, op, inputs, attrs, { scope, layer: this.layer });
  }

  /** Sets the loss: the tensor itself when it is a scalar, else mse_loss against a fixed random target. */
  finish(out: TensorId, seed = 7): Graph {
    let loss = out;
    const type = this.g.tensor(out).type;
    if (type.shape.length > 0) {
      const dims = type.shape.map((d) => d.coef);
      const r = new Rng(seed);
      const target = this.floats("target", dims, Array.from({ length: dims.reduce((a, b) => a * b, 1) }, () => r.normal()));
      loss = this.fn("mse_loss", [out, target]);
    }
    this.g.setLoss(loss);
    expect(verifyGraph(this.g)).toEqual([]);
    return this.g;
  }

  /** Random float64 parameters (N(0, 1) unless the case says otherwise). */
  params(seed = 3): Map<string, FloatTensor> {
    const r = new Rng(seed);
    const out = new Map<string, FloatTensor>();
    for (const p of this.g.params()) {
      const shape = p.type.shape.map((d) => d.coef);
      const draw = this.draw.get(p.name) ?? ((rr: Rng) => rr.normal());
      out.set(p.name, { shape, data: Float64Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => draw(r)) });
    }
    return out;
  }
}

export interface GradCheckOptions {
  /** Elements checked per parameter (a deterministic sample when the parameter is larger). */
  readonly perParam?: number;
  readonly h?: number;
  readonly rtol?: number;
  readonly atol?: number;
  /** Parameters to check (default all with a gradient). */
  readonly only?: readonly string[];
}

/**
 * Compares every parameter gradient of the training graph of `forward` with central differences of the
 * loss in float64. Returns how many elements were compared.
 */
export function checkGradients(forward: Graph, batch: Batch, params: ReadonlyMap<string, Tensor>, o: GradCheckOptions = {}): number {
  const training = buildTrainingGraph(forward, PLAIN_SGD);
  expect(verifyGraph(training)).toEqual([]);
  const s = new TrainingSession(training, { float: "f64", params });
  const { grads } = s.gradients(batch);
  const [h, rtol, atol, perParam] = [o.h ?? 1e-5, o.rtol ?? 1e-5, o.atol ?? 1e-7, o.perParam ?? 64];
  const pick = new Rng(11);
  let compared = 0;
  for (const p of training.params()) {
    if (o.only && !o.only.includes(p.name)) continue;
    const g = grads.get(p.name);
    expect(g, `no gradient for ${p.name}`).toBeDefined();
    const value = s.params.get(p.name)!.data;
    const n = value.length;
    const idx = n <= perParam ? [...Array(n).keys()] : Array.from({ length: perParam }, () => pick.int(n));
    for (const i of idx) {
      const v = value[i]!;
      value[i] = v + h;
      const up = s.loss(batch);
      value[i] = v - h;
      const down = s.loss(batch);
      value[i] = v;
      const numeric = (up - down) / (2 * h);
      const analytic = g!.data[i]!;
      const err = Math.abs(analytic - numeric);
      if (!(err <= atol + rtol * Math.abs(numeric))) {
        expect.fail(`${p.name}[${i}]: autodiff ${analytic}, finite differences ${numeric} (|diff| ${err.toExponential(2)})`);
      }
      compared++;
    }
  }
  return compared;
}
