// One training step of a real graph run op by op with the interpreter's kernels (f32), each op's native kernel
// on a device kind given the same operands and compared (rtol 1e-4, atol 1e-5, as the PyTorch parity test):
// the check every device kind's kernels pass (test/native/kernels.test.ts: cpu; cuda-kernels.test.ts: simt).
import { checkSources } from "../check/helpers.js";
import { checkLlamaTiny } from "./llama-tiny.js";
import { checkFile } from "../../src/check/check.js";
import { syntheticData } from "../../src/data/synthetic.js";
import type { Graph, TensorId } from "../../src/graph/graph.js";
import { initParams } from "../../src/interp/init.js";
import { kernelFor } from "../../src/interp/kernels/index.js";
import { bindDims, concreteShape } from "../../src/interp/run.js";
import { floatArray, type Tensor } from "../../src/interp/tensor.js";
import { numel } from "../../src/graph/dim.js";
import { isFloatDType } from "../../src/graph/types.js";
import type { NativeKernelDevice } from "../../src/native/binding.js";
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

export function model(name: string, overrides: Record<string, string> = {}) {
  const r =
    name === "llama-tiny" ? checkLlamaTiny(LLAMA_TRAIN) : name === "zoo" ? checkSources({ "zoo.fsm": ZOO }) : checkFile(samplePath(name as "mlp"), { overrides: sets(overrides) });
  if (!r.model) throw new Error(r.diagnostics.map((d) => d.message).join("; "));
  return r.model;
}

export interface Mismatch {
  op: string;
  id: number;
  output: number;
  worst: number;
}

/** Runs one step op by op; for every op with a native kernel, compares; returns the ops seen and the misses. */
export function compareStep(g: Graph, seq: number | undefined, batch: number, device: NativeKernelDevice = "cpu"): { seen: Set<string>; mismatches: Mismatch[]; compared: number } {
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
    if (hasNativeKernel(o.op, device)) {
      const got = nativeKernel(o.op, device)(inputs, o.attrs, ctx);
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


/** The test models' training graphs (model name, setting overrides, batch, seq). */
export const STEP_CASES: readonly [string, Record<string, string>, number, number | undefined][] = [
  ["mlp", {}, 8, undefined],
  ["mlp", { "train.optimizer": "sgd(lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.01)", "train.clip_grad_norm": "1.0" }, 8, undefined],
  ["gpt-tiny", {}, 4, 16],
  ["llama-tiny", {}, 4, 8],
  // Longer than the native attention's block of 256 query rows: a second, partial block of rows and keys.
  ["llama-tiny", {}, 1, 300],
  ["zoo", {}, 4, undefined],
];

export function trainingGraph(name: string, overrides: Record<string, string>): Graph {
  const m = model(name, overrides);
  return buildTrainingGraph(m.graph, m.train!);
}
