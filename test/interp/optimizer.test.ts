// The optimizer phase against hand computations: SGD (momentum, Nesterov, weight decay), Adam, AdamW and
// clipping by global norm, on loss = mse(p, 0) + mse(q, 0) with p = [1, −2, 3], q = [0.5, −1], so that
// ∂L/∂p = 2p/3 = [2/3, −4/3, 2] and ∂L/∂q = q.
import { describe, expect, it } from "vitest";
import type { Optimizer, TrainConfig } from "../../src/check/settings-types.js";
import type { Graph } from "../../src/graph/graph.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { TrainingSession, type Batch } from "../../src/interp/session.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { CaseBuilder, PLAIN_SGD } from "./helpers.js";

const P0 = [1, -2, 3];
const Q0 = [0.5, -1];

function problem(): { g: Graph; batch: Batch } {
  const c = new CaseBuilder();
  const p = c.param([3]);
  const q = c.param([2]);
  const lp = c.fn("mse_loss", [p, c.floats("tp", [3], [0, 0, 0])]);
  const lq = c.fn("mse_loss", [q, c.floats("tq", [2], [0, 0])]);
  return { g: c.finish(c.fn("add", [lp, lq])), batch: c.batch };
}

function session(optimizer: Optimizer, clipGradNorm?: number): { s: TrainingSession; batch: Batch; training: Graph } {
  const { g, batch } = problem();
  const train: TrainConfig = { ...PLAIN_SGD, optimizer, ...(clipGradNorm !== undefined && { clipGradNorm }) };
  const training = buildTrainingGraph(g, train);
  expect(verifyGraph(training)).toEqual([]);
  const params = new Map([
    ["p0", { shape: [3], data: Float64Array.from(P0) }],
    ["p1", { shape: [2], data: Float64Array.from(Q0) }],
  ]);
  return { s: new TrainingSession(training, { float: "f64", params }), batch, training };
}

const values = (s: TrainingSession, name: string): number[] => [...(s.params.get(name) ?? s.state.get(name))!.data];

function expectClose(got: number[], want: number[], digits = 12): void {
  expect(got.length).toBe(want.length);
  got.forEach((v, i) => expect(v, `element ${i}`).toBeCloseTo(want[i]!, digits));
}

describe("sgd", () => {
  it("plain: p −= lr·g", () => {
    const { s, batch } = session({ kind: "sgd", lr: 0.1, momentum: 0, weightDecay: 0, nesterov: false });
    s.step(batch);
    expectClose(values(s, "p0"), [1 - 0.1 * (2 / 3), -2 + 0.1 * (4 / 3), 3 - 0.1 * 2]);
    expectClose(values(s, "p1"), [0.5 - 0.05, -1 + 0.1]);
    expect(s.state.size).toBe(0);
  });

  it("momentum 0.9 with weight decay 0.01: buf = g on step 1, buf = 0.9·buf + g on step 2", () => {
    const { s, batch } = session({ kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01, nesterov: false });
    s.step(batch);
    // g = 2p/3 + 0.01·p = [0.6767, −1.3533, 2.03]; p −= 0.1·g
    expectClose(values(s, "p0"), [0.9323333333333333, -1.8646666666666667, 2.797]);
    const g1 = P0.map((p) => (2 * p) / 3 + 0.01 * p);
    expectClose(values(s, "p0.momentum_buffer"), g1);
    s.step(batch);
    const p1 = [0.9323333333333333, -1.8646666666666667, 2.797];
    const buf2 = p1.map((p, i) => 0.9 * g1[i]! + ((2 * p) / 3 + 0.01 * p));
    expectClose(values(s, "p0"), p1.map((p, i) => p - 0.1 * buf2[i]!));
    expectClose(values(s, "p0.momentum_buffer"), buf2);
  });

  it("nesterov: p −= lr·(g + μ·buf)", () => {
    const { s, batch } = session({ kind: "sgd", lr: 0.1, momentum: 0.9, weightDecay: 0.01, nesterov: true });
    s.step(batch);
    expectClose(values(s, "p0"), [0.8714333333333333, -1.7428666666666666, 2.6143]);
  });
});

describe("adam and adamw", () => {
  // After one step m̂ = g and v̂ = g², so the update is lr·g / (|g| + eps).
  it("adam: p −= lr·g/(|g| + eps) on step 1, then the step counter and moments carry over", () => {
    const { s, batch } = session({ kind: "adam", lr: 0.01, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    s.step(batch);
    expectClose(values(s, "p0"), [0.99000000015, -1.990000000075, 2.99000000005]);
    expectClose(values(s, "optimizer.step"), [1]);
    const g = P0.map((p) => (2 * p) / 3);
    expectClose(values(s, "p0.exp_avg"), g.map((x) => 0.1 * x));
    expectClose(values(s, "p0.exp_avg_sq"), g.map((x) => 0.001 * x * x));
    s.step(batch);
    expectClose(values(s, "optimizer.step"), [2]);
    const p1 = [0.99000000015, -1.990000000075, 2.99000000005];
    const want = p1.map((p, i) => {
      const g2 = (2 * p) / 3;
      const m = 0.9 * 0.1 * g[i]! + 0.1 * g2;
      const v = 0.999 * 0.001 * g[i]! ** 2 + 0.001 * g2 * g2;
      return p - (0.01 / (1 - 0.9 ** 2)) * (m / (Math.sqrt(v) / Math.sqrt(1 - 0.999 ** 2) + 1e-8));
    });
    expectClose(values(s, "p0"), want);
  });

  it("adam with weight decay 0.1 adds wd·p to the gradient", () => {
    const { s, batch } = session({ kind: "adam", lr: 0.01, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.1 });
    s.step(batch);
    expectClose(values(s, "p0"), [0.9900000001304348, -1.9900000000652174, 2.9900000000434783]);
  });

  it("adamw decays the weights directly: p·(1 − lr·wd) − lr·g/(|g| + eps)", () => {
    const { s, batch } = session({ kind: "adamw", lr: 0.01, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.1 });
    s.step(batch);
    expectClose(values(s, "p0"), [0.98900000015, -1.988000000075, 2.98700000005]);
  });
});

describe("clipping by global norm", () => {
  // ‖(2/3, −4/3, 2, 0.5, −1)‖ = 2.733536577809454; coef = 1 / (norm + 1e-6).
  it("scales every gradient by min(1, max_norm / (norm + 1e-6)) before the update", () => {
    const { s, batch } = session({ kind: "sgd", lr: 0.1, momentum: 0, weightDecay: 0, nesterov: false }, 1.0);
    const r = s.step(batch);
    expect(r.gradNorm).toBeCloseTo(2.733536577809454, 12);
    const coef = 0.3658263226808681;
    expectClose(values(s, "p0"), P0.map((p) => p - 0.1 * coef * ((2 * p) / 3)), 10);
    expectClose(values(s, "p1"), Q0.map((q) => q - 0.1 * coef * q), 10);
  });

  it("leaves gradients alone when the norm is below the maximum", () => {
    const { s, batch } = session({ kind: "sgd", lr: 0.1, momentum: 0, weightDecay: 0, nesterov: false }, 10);
    s.step(batch);
    expectClose(values(s, "p0"), P0.map((p) => p - 0.1 * ((2 * p) / 3)));
  });

  it("is part of the training graph: sum_squares per gradient, one global_norm, one clip_coef", () => {
    const { training } = session({ kind: "adamw", lr: 0.01, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.1 }, 1.0);
    const ops = training.ops().filter((o) => o.phase === "optimizer").map((o) => o.op);
    expect(ops).toEqual(["sum_squares", "sum_squares", "global_norm", "clip_coef", "step_increment", "adam_update", "adam_update"]);
  });
});
