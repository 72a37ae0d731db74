// Whole training steps of the samples on the reference interpreter: gradients of mlp and gpt-tiny against
// finite differences (float64), and the loss going down on the synthetic task over a few dozen steps.
import { describe, expect, it } from "vitest";
import { syntheticData } from "../../src/data/synthetic.js";
import { initParams } from "../../src/interp/init.js";
import { Rng } from "../../src/interp/random.js";
import { TrainingSession } from "../../src/interp/session.js";
import { checkSample, trainSample } from "../passes/helpers.js";
import { checkGradients } from "./helpers.js";

describe("a training step of a sample matches finite differences (float64)", () => {
  it("mlp.fsm: every parameter, a sample of elements each", () => {
    const { graph } = checkSample("mlp");
    const batch = syntheticData(graph, { seed: 3, batch: 8, float: "f64" }).batch(0);
    // A small step keeps the chance of crossing a ReLU kink between the two evaluations negligible.
    const n = checkGradients(graph, batch, initParams(graph, 1, "f64"), { perParam: 8, h: 1e-6, rtol: 1e-4, atol: 1e-8 });
    expect(n).toBeGreaterThan(60);
  });

  it("gpt-tiny.fsm: every parameter (tied wte.weight included), a sample of elements each", () => {
    const { graph } = checkSample("gpt-tiny");
    const batch = syntheticData(graph, { seed: 3, batch: 2, seq: 16, float: "f64" }).batch(0);
    // N(0, 1) weights: large enough that every gradient is far from zero and every op's nonlinearity matters.
    const r = new Rng(5);
    const params = initParams(graph, 1, "f64");
    for (const t of params.values()) for (let i = 0; i < t.data.length; i++) t.data[i] = t.data[i]! + 0.3 * r.normal();
    const n = checkGradients(graph, batch, params, { perParam: 4, rtol: 1e-5, atol: 1e-9 });
    expect(n).toBe(28 * 4);
  });
});

/** Mean of a few losses, so one noisy batch does not decide the test. */
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("the loss goes down on the synthetic task", () => {
  it("gpt-tiny with its adam settings (and clipping) over 40 steps", () => {
    const { training, model } = trainSample("gpt-tiny");
    const s = new TrainingSession(training, { seed: model.train!.seed });
    const data = syntheticData(training, { seed: model.train!.seed, batch: model.train!.batch, seq: model.train!.seq });
    const losses: number[] = [];
    let norms = 0;
    for (let i = 0; i < 40; i++) {
      const r = s.step(data.batch(i));
      losses.push(r.loss);
      if (r.gradNorm !== undefined) norms++;
    }
    console.log(`gpt-tiny (${data.description}): loss ${losses[0]!.toFixed(3)} → ${mean(losses.slice(-5)).toFixed(3)}`);
    expect(norms).toBe(40);
    expect(losses[0]).toBeCloseTo(Math.log(64), 0);
    expect(mean(losses.slice(-5))).toBeLessThan(0.7 * losses[0]!);
  });

  it("mlp with its sgd + momentum settings over 300 steps", () => {
    const { training, model } = trainSample("mlp");
    expect(model.train!.optimizer).toMatchObject({ kind: "sgd", momentum: 0.9 });
    const s = new TrainingSession(training, { seed: model.train!.seed });
    const data = syntheticData(training, { seed: model.train!.seed, batch: model.train!.batch });
    const losses: number[] = [];
    for (let i = 0; i < 300; i++) losses.push(s.step(data.batch(i)).loss);
    console.log(`mlp (${data.description}): loss ${mean(losses.slice(0, 10)).toFixed(3)} → ${mean(losses.slice(-10)).toFixed(3)}`);
    expect(mean(losses.slice(-10))).toBeLessThan(0.7 * mean(losses.slice(0, 10)));
  });

  it("is deterministic: the same seed gives the same losses", () => {
    const run = () => {
      const { training } = trainSample("gpt-tiny");
      const s = new TrainingSession(training, { seed: 1 });
      const data = syntheticData(training, { seed: 1, batch: 2, seq: 16 });
      return [0, 1, 2].map((i) => s.step(data.batch(i)).loss);
    };
    expect(run()).toEqual(run());
  });
});
