// Every native kernel against the interpreter's on real graphs: one training step of mlp, gpt-tiny (tied
// embedding, GELU, layer norm, causal attention, Adam with clipping) and a tiny Llama (GQA, rotary, RMSNorm,
// SwiGLU, AdamW, SGD variants) runs op by op in f32 with the interpreter's kernels; each op's native kernel
// gets the same operands and must give the same outputs (rtol 1e-4, atol 1e-5, as the PyTorch parity test).
import { describe, expect, it } from "vitest";
import { checkSources } from "../check/helpers.js";
import { checkLlamaTiny } from "../support/llama-tiny.js";
import { checkFile } from "../../src/check/check.js";
import { syntheticData } from "../../src/data/synthetic.js";
import type { Graph, TensorId } from "../../src/graph/graph.js";
import { initParams } from "../../src/interp/init.js";
import { KERNELS, kernelFor } from "../../src/interp/kernels/index.js";
import { bindDims, concreteShape } from "../../src/interp/run.js";
import { floatArray, type Tensor } from "../../src/interp/tensor.js";
import { numel } from "../../src/graph/dim.js";
import { isFloatDType } from "../../src/graph/types.js";
import { nativeFailure, runNativeKernel } from "../../src/native/binding.js";
import { hasNativeKernel, nativeKernel } from "../../src/native/kernels.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { samplePath, sets } from "../compile/helpers.js";

const RTOL = 1e-4;
const ATOL = 1e-5;

const LLAMA_TRAIN = "train { batch = 4, seq = 8, optimizer = adamw(lr: 1e-3, weight_decay: 0.1), clip_grad_norm = 0.5, precision = fp32, seed = 1, steps = 1, data = synthetic() }\n";

// The function ops no sample uses (reshape, transpose, matmul, softmax, sub, div, scale), in one small model.
const ZOO = `
block Mix(d: int) {
  fc = linear(d, d)
  forward(x) {
    a = reshape(fc(x), [B, 4, d / 4])
    s = softmax(matmul(a, transpose(a, 1, 2)), dim: -1)
    h = reshape(matmul(s, a), [B, d])
    return div(sub(h, scale(x, 0.5)), softmax(fc(x), dim: -1))
  }
}
model zoo {
  const d = 16
  mix = Mix(d)
  head = linear(d, d)
  forward(x: f32[B, d], y: f32[B, d]) {
    return mse_loss(head(mix(x)), y)
  }
}
train { batch = 4, optimizer = sgd(lr: 0.01), precision = fp32, seed = 1, steps = 1, data = synthetic() }
`;

function model(name: string, overrides: Record<string, string> = {}) {
  const r =
    name === "llama-tiny" ? checkLlamaTiny(LLAMA_TRAIN) : name === "zoo" ? checkSources({ "zoo.fsm": ZOO }) : checkFile(samplePath(name as "mlp"), { overrides: sets(overrides) });
  if (!r.model) throw new Error(r.diagnostics.map((d) => d.message).join("; "));
  return r.model;
}

interface Mismatch {
  op: string;
  id: number;
  output: number;
  worst: number;
}

/** Runs one step op by op; for every op with a native kernel, compares; returns the ops seen and the misses. */
function compareStep(g: Graph, seq: number | undefined, batch: number): { seen: Set<string>; mismatches: Mismatch[]; compared: number } {
  const data = syntheticData(g, { batch, ...(seq !== undefined && { seq }), seed: 5 });
  const values = new Map<TensorId, Tensor>();
  const b = data.batch(0);
  for (const t of g.inputs()) values.set(t, b[g.tensor(t).name]!);
  const params = initParams(g, 3, "f32");
  for (const p of g.params()) values.set(p.tensor, params.get(p.name)!);
  for (const s of g.states()) values.set(s.tensor, { shape: s.type.shape.map((d) => numel([d])), data: floatArray("f32", numel(s.type.shape)) });
  const bindings = bindDims(g, b);
  const seen = new Set<string>();
  const mismatches: Mismatch[] = [];
  let compared = 0;
  for (const o of g.ops()) {
    seen.add(o.op);
    const inputs = o.inputs.map((t) => values.get(t)!);
    const outShapes = o.outputs.map((t) => concreteShape(g.tensor(t).type.shape, bindings));
    const outInt = o.outputs.map((t) => !isFloatDType(g.tensor(t).type.dtype));
    const ctx = { outShapes, outInt, float: "f32" as const };
    const want = kernelFor(o.op)(inputs, o.attrs, ctx);
    if (hasNativeKernel(o.op)) {
      const got = nativeKernel(o.op)(inputs, o.attrs, ctx);
      compared++;
      want.forEach((w, i) => {
        const a = w.data;
        const n = got[i]!.data;
        let worst = 0;
        for (let k = 0; k < a.length; k++) worst = Math.max(worst, Math.abs(a[k]! - n[k]!) / (ATOL + RTOL * Math.abs(a[k]!)));
        if (!(worst <= 1) || n.length !== a.length) mismatches.push({ op: o.op, id: o.id, output: i, worst });
      });
    }
    o.outputs.forEach((t, i) => values.set(t, want[i]!));
  }
  return { seen, mismatches, compared };
}

describe("native kernels match the interpreter's", () => {
  const cases: [string, Record<string, string>, number, number | undefined][] = [
    ["mlp", {}, 8, undefined],
    ["mlp", { "train.optimizer": "sgd(lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.01)", "train.clip_grad_norm": "1.0" }, 8, undefined],
    ["gpt-tiny", {}, 4, 16],
    ["llama-tiny", {}, 4, 8],
    // Longer than the native attention's block of 256 query rows: a second, partial block of rows and keys.
    ["llama-tiny", {}, 1, 300],
    ["zoo", {}, 4, undefined],
  ];
  const seen = new Set<string>();
  for (const [name, overrides, batch, seq] of cases) {
    it(`${name} ${JSON.stringify(overrides)}: every op with a native kernel agrees`, () => {
      const m = model(name, overrides);
      const g = buildTrainingGraph(m.graph, m.train!);
      const r = compareStep(g, seq, batch);
      for (const op of r.seen) seen.add(op);
      expect(r.mismatches).toEqual([]);
      expect(r.compared).toBeGreaterThan(0);
    });
  }

  it("every op the interpreter has, the native addon has (and the models above exercise them all)", () => {
    const missing = Object.keys(KERNELS).filter((op) => !hasNativeKernel(op));
    expect(missing, `native kernels missing for: ${missing.join(", ")}`).toEqual([]);
    const unexercised = Object.keys(KERNELS).filter((op) => !seen.has(op));
    expect(unexercised, `no test model uses: ${unexercised.join(", ")}`).toEqual([]);
  });

  it("relu keeps NaN as PyTorch does (a poisoned activation reaches the loss), in both kernels", () => {
    const x = { shape: [3], data: Float32Array.of(Number.NaN, -1, 2) };
    const native = nativeKernel("relu")([x], {}, { outShapes: [[3]], float: "f32" })[0]!.data;
    const interp = kernelFor("relu")([x], {}, { outShapes: [[3]], float: "f32" })[0]!.data;
    for (const out of [native, interp]) expect(Array.from(out)).toEqual([Number.NaN, 0, 2]);
  });

  it("an op without a native kernel is a clear error", () => {
    expect(() => nativeKernel("no_such_op")([], {}, { outShapes: [], float: "f32" })).toThrow("not implemented: native kernel for op 'no_such_op' on device kind cpu");
  });

  it("kernel failures and malformed calls carry their fields", () => {
    const failureOf = (call: () => unknown) => {
      try {
        call();
      } catch (e) {
        return nativeFailure(e);
      }
      throw new Error("expected the call to throw");
    };
    const embed = () => runNativeKernel("embedding", [{ data: Int32Array.of(4), shape: [1] }, { data: new Float32Array(6), shape: [3, 2] }], {}, [{ shape: [1, 2], dtype: "f32" }]);
    expect(embed).toThrow(/^native kernel embedding: embedding index 4 is out of range \[0, 3\)$/);
    expect(failureOf(embed)).toEqual({ kind: "kernel", op: "embedding", message: "embedding index 4 is out of range [0, 3)" });
    expect(failureOf(() => runNativeKernel("no_such_op", [], {}, []))).toMatchObject({ kind: "description", message: "not implemented: native kernel for op 'no_such_op' on device kind cpu" });
    expect(failureOf(() => runNativeKernel("relu", [{ data: new Float32Array(2), shape: [3] }], {}, [{ shape: [3], dtype: "f32" }]))).toMatchObject({
      kind: "description", message: "runKernel relu: input 0: data length does not match its shape",
    });
  });
});
