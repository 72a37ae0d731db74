// Optional parity with PyTorch (Debian's python3-torch under /usr/bin/python3): the loss and every
// parameter gradient of gpt-tiny and of a tiny Llama (grouped-query attention, rotary embeddings, RMSNorm,
// SwiGLU) from the interpreter match an independent torch implementation (pytorch_reference.py).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkLlamaTiny } from "../support/llama-tiny.js";
import { syntheticData } from "../../src/data/synthetic.js";
import type { Graph } from "../../src/graph/graph.js";
import { initParams } from "../../src/interp/init.js";
import { Rng } from "../../src/interp/random.js";
import { TrainingSession, type Batch } from "../../src/interp/session.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { checkSample } from "../passes/helpers.js";
import { PLAIN_SGD } from "./helpers.js";

const PYTHON = "/usr/bin/python3";
const SCRIPT = join(import.meta.dirname, "pytorch_reference.py");
const hasTorch = spawnSync(PYTHON, ["-c", "import torch"], { timeout: 120_000 }).status === 0;
const RTOL = 1e-4;
const ATOL = 1e-5;


const bytes = (a: Float32Array | Int32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** Runs the interpreter (f32) and the torch script on the same weights and batch; compares loss and gradients. */
function compare(graph: Graph, arch: "gpt" | "llama", config: Record<string, unknown>, batch: Batch, B: number, S: number): void {
  // The initial weights plus noise, so that norms' scales and biases are not trivially 1 and 0.
  const params = initParams(graph, 1, "f32");
  const r = new Rng(9);
  for (const t of params.values()) for (let i = 0; i < t.data.length; i++) t.data[i] = t.data[i]! + 0.05 * r.normal();
  const s = new TrainingSession(buildTrainingGraph(graph, PLAIN_SGD), { params });
  const { loss, grads } = s.gradients(batch);

  const dir = mkdtempSync(join(tmpdir(), "fsm-torch-"));
  try {
    const meta = { arch, config, batch: [B, S], params: graph.params().map((p) => ({ name: p.name, shape: params.get(p.name)!.shape })) };
    writeFileSync(join(dir, "meta.json"), JSON.stringify(meta));
    for (const [name, t] of params) writeFileSync(join(dir, `param.${name}.bin`), bytes(t.data as Float32Array));
    writeFileSync(join(dir, "tokens.bin"), bytes(batch["tokens"]!.data as Int32Array));
    writeFileSync(join(dir, "targets.bin"), bytes(batch["targets"]!.data as Int32Array));
    const run = spawnSync(PYTHON, [SCRIPT, dir], { encoding: "utf8", timeout: 120_000 });
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(readFileSync(join(dir, "result.json"), "utf8")) as { loss: number };
    expect(Math.abs(loss - result.loss)).toBeLessThanOrEqual(ATOL + RTOL * Math.abs(result.loss));
    for (const p of graph.params()) {
      const buf = readFileSync(join(dir, `grad.${p.name}.bin`));
      const want = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
      const got = grads.get(p.name)!.data;
      expect(got.length, p.name).toBe(want.length);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) - RTOL * Math.abs(want[i]!));
      expect(worst, `gradient of ${p.name}`).toBeLessThanOrEqual(ATOL);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("PyTorch parity (float32, rtol 1e-4, atol 1e-5)", () => {
  if (!hasTorch) {
    it.skip("python3-torch not installed: apt-get install -y python3-torch", () => {});
    return;
  }

  it("gpt-tiny: loss and every parameter gradient (tied wte.weight included)", () => {
    const { graph } = checkSample("gpt-tiny");
    const batch = syntheticData(graph, { seed: 4, batch: 4, seq: 16 }).batch(0);
    compare(graph, "gpt", { d: 32, heads: 4, n_layer: 2 }, batch, 4, 16);
  }, 120_000);

  it("a tiny Llama: grouped-query attention with rotary embeddings, RMSNorm, SwiGLU", () => {
    const r = checkLlamaTiny();
    expect(r.diagnostics).toEqual([]);
    const graph = r.model!.graph;
    const batch = syntheticData(graph, { seed: 4, batch: 2, seq: 12 }).batch(0);
    compare(graph, "llama", { heads: 4, kv_heads: 2, n_layer: 2, rope: true, eps: 1e-5 }, batch, 2, 12);
  }, 120_000);
});
