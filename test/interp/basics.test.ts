// Interpreter building blocks: erf accuracy, the PRNG and parameter initialization, synthetic data, the
// kernel table's coverage of the registry, and errors on bad data.
import { describe, expect, it } from "vitest";
import { syntheticData } from "../../src/data/synthetic.js";
import { allOps } from "../../src/graph/registry.js";
import { initParams, INIT_STD } from "../../src/interp/init.js";
import { erf } from "../../src/interp/kernels/erf.js";
import { KERNELS } from "../../src/interp/kernels/index.js";
import { Rng, streamSeed } from "../../src/interp/random.js";
import { bindDims } from "../../src/interp/run.js";
import { TrainingSession } from "../../src/interp/session.js";
import { checkSample, trainSample } from "../passes/helpers.js";

describe("erf", () => {
  // Reference values from mpmath (50 digits), rounded to 17 significant digits.
  const table: [number, number][] = [
    [0, 0],
    [1e-8, 1.1283791670955126e-8],
    [0.1, 0.1124629160182849],
    [0.5, 0.5204998778130465],
    [1, 0.8427007929497149],
    [1.5, 0.9661051464753108],
    [2, 0.9953222650189527],
    [2.4999, 0.99959283009966655],
    [2.5, 0.999593047982555],
    [3, 0.9999779095030014],
    [4, 0.9999999845827421],
    [5.9, 0.99999999999999993],
    [7, 1],
  ];
  it("matches reference values to better than 1e-14 and is odd", () => {
    for (const [x, want] of table) {
      expect(Math.abs(erf(x) - want), `erf(${x})`).toBeLessThan(1e-14);
      expect(erf(-x) + erf(x)).toBe(0);
    }
  });
  it("is continuous where the method changes at 2.5", () => {
    expect(Math.abs(erf(2.5 - 1e-12) - erf(2.5))).toBeLessThan(1e-14);
  });
});

describe("random numbers and initialization", () => {
  it("mulberry32 streams are deterministic and named streams differ", () => {
    const a = new Rng(streamSeed(1, "w"));
    const b = new Rng(streamSeed(1, "w"));
    const xs = [a.uniform(), a.uniform(), a.normal()];
    expect([b.uniform(), b.uniform(), b.normal()]).toEqual(xs);
    expect(new Rng(streamSeed(1, "v")).uniform()).not.toBe(xs[0]);
    expect(new Rng(streamSeed(2, "w")).uniform()).not.toBe(xs[0]);
    for (const x of xs.slice(0, 2)) expect(x >= 0 && x < 1).toBe(true);
  });

  it("Box-Muller normals have mean 0 and variance 1", () => {
    const r = new Rng(42);
    const n = 20000;
    let s = 0;
    let s2 = 0;
    for (let i = 0; i < n; i++) {
      const z = r.normal();
      s += z;
      s2 += z * z;
    }
    expect(Math.abs(s / n)).toBeLessThan(0.03);
    expect(Math.abs(s2 / n - 1)).toBeLessThan(0.05);
  });

  it("initializes embeddings N(0, 0.02²), linear weights U(±1/√in), norms with ones, biases with zeros, from the seed", () => {
    const { graph } = checkSample("gpt-tiny");
    const p = initParams(graph, 1);
    expect([...p.keys()]).toEqual(graph.params().map((q) => q.name));
    const e = p.get("wpe.weight")!;
    expect(e.shape).toEqual([16, 32]);
    const std = Math.sqrt([...e.data].reduce((a, v) => a + v * v, 0) / e.data.length);
    expect(Math.abs(std - INIT_STD)).toBeLessThan(0.003);
    // U(-b, b) with b = 1/√32: every value inside, and the variance b²/3.
    const w = p.get("layers.0.mlp.fc.weight")!;
    expect(w.shape).toEqual([128, 32]);
    const bound = 1 / Math.sqrt(32);
    expect([...w.data].every((v) => Math.abs(v) <= bound)).toBe(true);
    const varW = [...w.data].reduce((a, v) => a + v * v, 0) / w.data.length;
    expect(Math.abs(varW - (bound * bound) / 3) / ((bound * bound) / 3)).toBeLessThan(0.05);
    expect([...p.get("layers.0.ln_1.weight")!.data].every((v) => v === 1)).toBe(true);
    expect([...p.get("layers.0.ln_1.bias")!.data].every((v) => v === 0)).toBe(true);
    expect(initParams(graph, 1).get("wte.weight")!.data).toEqual(p.get("wte.weight")!.data);
    expect(initParams(graph, 2).get("wte.weight")!.data).not.toEqual(p.get("wte.weight")!.data);
    expect(initParams(graph, 1, "f64").get("wte.weight")!.data).toBeInstanceOf(Float64Array);
  });
});

describe("synthetic data", () => {
  it("token models: targets follow (a·token + b) mod vocab; batches are deterministic and differ", () => {
    const { graph } = checkSample("gpt-tiny");
    const data = syntheticData(graph, { seed: 1, batch: 3, seq: 16 });
    const [a, b, V] = data.description.match(/\((\d+)·token \+ (\d+)\) mod (\d+)/)!.slice(1).map(Number) as [number, number, number];
    expect(V).toBe(64);
    const x = data.batch(0);
    expect(x["tokens"]!.shape).toEqual([3, 16]);
    const [tok, tgt] = [x["tokens"]!.data, x["targets"]!.data];
    for (let i = 0; i < tok.length; i++) expect(tgt[i]).toBe((a * tok[i]! + b) % V);
    for (let i = 0; i + 1 < 16; i++) expect(tok[i + 1]).toBe(tgt[i]);
    expect(syntheticData(graph, { seed: 1, batch: 3, seq: 16 }).batch(0)["tokens"]!.data).toEqual(tok);
    expect(data.batch(1)["tokens"]!.data).not.toEqual(tok);
    expect(bindDims(graph, x)).toEqual({ B: 3, S: 16 });
  });

  it("float models: y = tanh(W·x) with a fixed W", () => {
    const { graph } = checkSample("mlp");
    const data = syntheticData(graph, { seed: 1, batch: 4, float: "f64" });
    const [b0, b1] = [data.batch(0), data.batch(1)];
    expect(b0["x"]!.shape).toEqual([4, 32]);
    expect(b0["y"]!.shape).toEqual([4, 8]);
    expect(b0["x"]!.data).toBeInstanceOf(Float64Array);
    expect([...b0["y"]!.data].every((v) => Math.abs(v) < 1)).toBe(true);
    expect(b1["x"]!.data).not.toEqual(b0["x"]!.data);
  });

  it("token models need a sequence length", () => {
    expect(() => syntheticData(checkSample("gpt-tiny").graph, { seed: 1, batch: 2 })).toThrow(/sequence length/);
  });
});

describe("kernels", () => {
  it("exist for every op in the registry, internal ones included", () => {
    const missing = allOps().map((d) => d.name).filter((n) => !KERNELS[n]);
    expect(missing).toEqual([]);
  });

  it("report out-of-range token ids and targets clearly", () => {
    const { training } = trainSample("gpt-tiny");
    const s = new TrainingSession(training, { seed: 1 });
    const batch = syntheticData(training, { seed: 1, batch: 1, seq: 4 }).batch(0);
    const bad = { ...batch, tokens: { shape: [1, 4], data: Int32Array.from([0, 1, 99, 2]) } };
    expect(() => s.loss(bad)).toThrow(/embedding index 99 is out of range \[0, 64\)/);
    expect(() => s.loss({ tokens: batch["tokens"]! })).toThrow(/no value for input 'targets'/);
  });

  it("runs a forward graph too (loss only)", () => {
    const { graph } = checkSample("gpt-tiny");
    const s = new TrainingSession(graph, { seed: 1 });
    const loss = s.loss(syntheticData(graph, { seed: 1, batch: 2, seq: 16 }).batch(0));
    // Near-uniform predictions at init: about ln 64.
    expect(Math.abs(loss - Math.log(64))).toBeLessThan(0.3);
  });
});
