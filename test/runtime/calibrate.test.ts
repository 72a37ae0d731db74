// `fsm calibrate` writes a calibration file the cost model reads back: every forward op of the model, at
// every micro-batch size the search may pick, gets this machine's measured time.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { loadCalibration } from "../../src/cost/calibration.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { costGraph } from "../../src/cost/graph-cost.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { runCli as run } from "../support/cli.js";
import { samplePath } from "../compile/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-calibrate-"));

describe("fsm calibrate", () => {
  it("measures every forward op at every micro-batch size; compile uses the measurements", async () => {
    const plan = join(dir, "tiny.json");
    const cal = join(dir, "cal.json");
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "1", "-o", plan)).code).toBe(0);
    const r = await run("calibrate", plan, "-o", cal, "--repeats", "3");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/calibrated \d+ op shapes on .*; wrote /);
    const calibration = loadCalibration(cal);
    expect(calibration.profile).toBe("cpu");
    for (const e of calibration.entries) {
      expect(e.forwardSeconds).toBeGreaterThan(0);
      expect(e.backwardSeconds).toBeGreaterThanOrEqual(0);
    }
    const model = checkFile(samplePath("gpt-tiny"), {}).model!;
    const training = buildTrainingGraph(model.graph, model.train!);
    const forwardOps = training.ops().filter((o) => o.phase === "forward").length;
    const cluster = clusterFor("cpu", 1, calibration);
    for (const B of [1, 2, 4, 8]) {
      expect(costGraph(training, { cluster, precision: "fp32", bindings: { B, S: 16 } }).calibratedOps, `B=${B}`).toBe(forwardOps);
    }
    const compiled = await run("compile", samplePath("gpt-tiny"), "--devices", "1", "--calibration", cal, "-o", join(dir, "tiny-cal.json"));
    expect(compiled.code).toBe(0);
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
