// The kernel parity check (src/native/kernel-parity.ts: one training step op by op on the interpreter, each op's
// native kernel on a device kind compared at rtol 1e-4, atol 1e-5, as the PyTorch parity test) on the test
// models, which every device kind's kernels pass (test/native/kernels.test.ts: cpu; cuda-kernels.test.ts: simt).
import { checkSources } from "../check/helpers.js";
import { checkLlamaTiny } from "./llama-tiny.js";
import { checkFile } from "../../src/check/check.js";
import type { Graph } from "../../src/graph/graph.js";
import type { NativeKernelDevice } from "../../src/native/binding.js";
import { compareKernels, type KernelParity } from "../../src/native/kernel-parity.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { samplePath, sets } from "../compile/helpers.js";

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

/** One step of `g` op by op on the interpreter, each op with a kernel on `device` compared (f32 operands). */
export function compareStep(g: Graph, seq: number | undefined, batch: number, device: NativeKernelDevice = "cpu"): KernelParity {
  return compareKernels(g, { batch, ...(seq !== undefined && { seq }), device });
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
