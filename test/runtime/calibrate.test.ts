// `fsm calibrate` writes a calibration file the cost model reads back: every forward op of the model, at
// every micro-batch size the search may pick, gets this machine's measured time.
import { mkdtempSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { loadCalibration } from "../../src/cost/calibration.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { costGraph } from "../../src/cost/graph-cost.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { deviceCounts } from "../../src/runtime/calibrate.js";
import { fitAlphaBeta } from "../../src/runtime/calibrate-comm.js";
import { runCli as run } from "../support/cli.js";
import { samplePath } from "../compile/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-calibrate-"));

describe("fsm calibrate", () => {
  it("measures every forward op at every micro-batch size; compile uses the measurements", async () => {
    const plan = join(dir, "tiny.json");
    const cal = join(dir, "cal.json");
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "1", "-o", plan)).code).toBe(0);
    const r = await run("calibrate", plan, "-o", cal, "--repeats", "3", "--devices", "2");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/calibrated \d+ op shapes on .*; wrote /);
    const calibration = loadCalibration(cal);
    expect(calibration.profile).toBe("cpu");
    for (const e of calibration.entries) {
      expect(e.forwardSeconds).toBeGreaterThan(0);
      expect(e.backwardSeconds).toBeGreaterThanOrEqual(0);
      expect(e.allCores!.forwardSeconds).toBeGreaterThan(0);
    }
    // Every linear's backward runs its input- and weight-gradient ops (and the bias's sum_to).
    expect(calibration.entries.filter((e) => e.op === "linear").every((e) => e.backwardOps! >= 2)).toBe(true);
    // The machine's cores, the host's overheads for 1 and 2 devices, every collective kind over 2 devices.
    expect(calibration.cores).toBe(availableParallelism());
    expect(calibration.host!.step.map((s) => s.devices)).toEqual([1, 2]);
    expect(calibration.host!.blockingStep!.map((s) => s.devices)).toEqual([1, 2]);
    // An empty step is timed whole, its feeding and losses within it (step by step, so their medians too).
    expect(calibration.host!.step[0]!.seconds).toBeGreaterThanOrEqual(calibration.host!.loopSeconds);
    expect(calibration.host!.loopSeconds).toBeGreaterThan(0);
    expect(calibration.collectives!.map((c) => `${c.kind}/${c.ranks}`).sort()).toEqual(["all_gather/2", "all_reduce/2", "broadcast/2", "reduce/2", "reduce_scatter/2", "send_recv/2"]);
    for (const c of calibration.collectives!) expect(c.samples.length).toBeGreaterThanOrEqual(3);
    const model = checkFile(samplePath("gpt-tiny"), {}).model!;
    const training = buildTrainingGraph(model.graph, model.train!);
    expect(calibration.optimizer!.ops).toBe(training.ops().filter((o) => o.phase === "optimizer").length);
    const forwardOps = training.ops().filter((o) => o.phase === "forward").length;
    const cluster = clusterFor("cpu", 1, calibration);
    for (const B of [1, 2, 4, 8]) {
      expect(costGraph(training, { cluster, precision: "fp32", bindings: { B, S: 16 } }).calibratedOps, `B=${B}`).toBe(forwardOps);
    }
    const compiled = await run("compile", samplePath("gpt-tiny"), "--devices", "1", "--calibration", cal, "-o", join(dir, "tiny-cal.json"));
    expect(compiled.code).toBe(0);
  });

  it("fits α + β·bytes to a collective's samples, neither negative", () => {
    const line = [4096, 65536, 1 << 20].map((bytes) => ({ bytes, seconds: 5e-6 + 2e-10 * bytes }));
    const fit = fitAlphaBeta(line);
    expect(fit.latencySeconds).toBeCloseTo(5e-6, 12);
    expect(fit.secondsPerByte).toBeCloseTo(2e-10, 16);
    // Bigger buffers faster (noise): no bandwidth term, the weighted mean time as the latency.
    expect(fitAlphaBeta([{ bytes: 1000, seconds: 2e-5 }, { bytes: 2000, seconds: 1e-5 }]).secondsPerByte).toBe(0);
    // A line through below zero: no latency, the slope through the origin.
    const steep = fitAlphaBeta([{ bytes: 1000, seconds: 1e-6 }, { bytes: 2000, seconds: 3e-6 }]);
    expect(steep.latencySeconds).toBe(0);
    expect(steep.secondsPerByte).toBeGreaterThan(0);
  });

  it("measures 1..4 devices and the powers of two up to the most asked for", () => {
    expect(deviceCounts(1)).toEqual([1]);
    expect(deviceCounts(4)).toEqual([1, 2, 3, 4]);
    expect(deviceCounts(6)).toEqual([1, 2, 3, 4, 6]);
    expect(deviceCounts(16)).toEqual([1, 2, 3, 4, 8, 16]);
  });

  it("refuses what it cannot measure", async () => {
    const plan = join(dir, "gpu.json");
    expect((await run("compile", samplePath("gpt-tiny"), "--cluster", "h100-sxm", "--devices", "1", "-o", plan)).code).toBe(0);
    const r = await run("calibrate", plan, "-o", join(dir, "x.json"));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("compile the plan with --cluster cpu");
    expect((await run("calibrate", plan, "--repeats", "0")).code).toBe(2);
  });
});
