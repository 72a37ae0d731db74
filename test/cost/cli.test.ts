// `fsm cost` as a user runs it (in-process through main()): the per-layer table and totals, the JSON form,
// and exit codes for argument mistakes (2) and model mistakes (1).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli as run } from "../support/cli.js";
import type { ModelEstimate } from "../../src/cost/estimate.js";

const root = resolve(import.meta.dirname, "../..");
const sample = (f: string) => join(root, "samples", f);


describe("fsm cost", () => {
  it("prints a per-layer table, totals and memory for gpt2 on the default cluster", async () => {
    const r = await run("cost", sample("gpt2-124m.fsm"));
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("model gpt2 on cpu (1 device, 1 node): batch 512, seq 1024, bf16, adamw");
    expect(r.stdout).toContain("activations for a micro-batch of 512 (the whole batch: chunks are not chosen yet)");
    expect(r.stdout).toMatch(/^layer +parameters +fwd FLOPs +bwd FLOPs +activations +checkpointed +time \(1 device\)$/m);
    expect(r.stdout).toMatch(/^layers\.0 +7,087,872 /m);
    expect(r.stdout).toMatch(/^lm_head +0 /m);
    expect(r.stdout).toMatch(/^total +124,439,808 /m);
    expect(r.stdout).toContain("model state: 18 bytes/parameter (2 weights + 4 gradients + 12 optimizer)");
    expect(r.stdout).toMatch(/^FLOPs per step: 450 TFLOP \(forward 150 TFLOP, backward /m);
  });

  it("--json carries parameters, FLOPs per step, model state, layers and cluster", async () => {
    const r = await run("cost", sample("gpt2-124m.fsm"), "--json", "--cluster", "h100-sxm", "--devices", "16");
    expect(r.code).toBe(0);
    const e = JSON.parse(r.stdout) as ModelEstimate;
    expect(e.parameters).toBe(124_439_808);
    expect(e.modelStateBytesPerParam).toBe(18);
    expect(e.cluster).toMatchObject({ name: "h100-sxm", devices: 16, nodes: 2, devicesPerNode: 8 });
    expect(e.layers).toHaveLength(16);
    expect(e.layers.reduce((n, l) => n + l.parameters, 0)).toBe(124_439_808);
    const perLayer = e.layers.reduce((n, l) => n + l.forwardFlops + l.backwardFlops.input + l.backwardFlops.weight, 0);
    expect(e.flopsPerStep).toBe(perLayer);
    // 6·N·tokens + attention, N = 12·L·d² + V·d: within 1% (the flops tests pin this per model).
    const n = 12 * 12 * 768 ** 2 + 50257 * 768;
    expect(e.flopsPerStep / (512 * 1024 * (6 * n + 12 * 12 * 768 * 1024))).toBeCloseTo(1, 1);
    expect(e.modelStateBytesPerDevice.fsdp).toBe(18 * Math.ceil(124_439_808 / 16));
    expect(e.modelStateBytesPerDevice.none).toBe(18 * 124_439_808);
    expect(e.activationBytesPerMicroBatch.checkpointed).toBeLessThan(e.activationBytesPerMicroBatch.full);
    expect(e.microBatch).toBe(512);
  });

  it("--set changes the batch the FLOPs are for", async () => {
    const base = JSON.parse((await run("cost", sample("mlp.fsm"), "--json")).stdout) as ModelEstimate;
    const big = JSON.parse((await run("cost", sample("mlp.fsm"), "--json", "--set", "train.batch=64")).stdout) as ModelEstimate;
    expect(big.batch).toBe(64);
    expect(big.flopsPerStep).toBe(2 * base.flopsPerStep);
    expect(base.modelStateBytesPerParamSplit).toEqual({ param: 4, grad: 4, optimizer: 4 });
    expect(base.seq).toBeNull(); // the MLP has no sequence dimension
  });

  it("argument mistakes exit with 2 and say what is wrong", async () => {
    const unknown = await run("cost", sample("mlp.fsm"), "--cluster", "tpu-v4");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("fsm cost: unknown cluster 'tpu-v4'; known clusters: cpu, a100-80g, h100-sxm, h200");
    for (const bad of ["0", "-3", "two", "1.5"]) {
      const r = await run("cost", sample("mlp.fsm"), "--devices", bad);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain("--devices must be a positive integer");
    }
    const cal = await run("cost", sample("mlp.fsm"), "--calibration", join(root, "no-such-calibration.json"));
    expect(cal.code).toBe(2);
    expect(cal.stderr).toContain("cannot read calibration file");
    expect((await run("cost")).code).toBe(2);
  });

  it("model mistakes are diagnostics with exit 1", async () => {
    const r = await run("cost", join(root, "test/fixtures/errors/shape-linear-mismatch.fsm"));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("error[FSM402]");
  });

  it("a model without a train section cannot be costed (exit 1)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-cost-"));
    const file = join(dir, "no-train.fsm");
    writeFileSync(file, "model m {\n  fc = linear(4, 2)\n  forward(x: f32[B, 4], y: f32[B, 2]) {\n    return mse_loss(fc(x), y)\n  }\n}\n");
    const r = await run("cost", file);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("model m has no train section: the cost needs its batch (and seq)");
  });

  it("--help prints the usage", async () => {
    const r = await run("cost", "--help");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("fsm cost FILE [--cluster NAME] [--devices N]");
  });
});
