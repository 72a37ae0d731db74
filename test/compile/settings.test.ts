// Settings resolution: the few derivations compile makes by itself, and a clear error for every other `auto`.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { CompileError } from "../../src/compile/errors.js";
import { stageSizes } from "../../src/compile/stages.js";
import { deriveMesh } from "../../src/compile/derive.js";
import { compileSample, samplePath, sets } from "./helpers.js";

function compileError(overrides: Record<string, string | number>, devices?: number, name: "mlp" | "gpt-tiny" = "mlp"): string {
  const model = checkFile(samplePath(name), { overrides: sets(overrides) }).model!;
  try {
    compileModel(model, { cluster: "cpu", source: name, fsmVersion: "test", ...(devices !== undefined && { devices }) });
  } catch (e) {
    if (e instanceof CompileError) return e.message;
    throw e;
  }
  throw new Error("expected a CompileError");
}

describe("settings left auto", () => {
  it("stages auto (with nothing to derive it from) names the setting and how to give it", () => {
    const m = compileError({});
    expect(m).toContain("parallel.stages is auto");
    expect(m).toContain("not implemented yet");
    expect(m).toContain("--set parallel.stages=4");
  });

  it("stages auto with only data_parallel given", () => {
    expect(compileError({ data_parallel: 2 })).toContain("parallel.stages is auto");
  });

  it("shard auto is not derived when there are replicas to shard over", () => {
    const m = compileError({ stages: 2, data_parallel: 2, chunks: 2 }, undefined, "gpt-tiny");
    expect(m).toContain("parallel.shard is auto");
    expect(m).toContain("one of none, oss, sddp, fsdp");
  });

  it("shard auto is none without data parallelism (a group of one has nothing to shard)", () => {
    const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 2, data_parallel: 1, chunks: 2 }) }).model!;
    const c = compileModel(model, { cluster: "cpu", source: "gpt-tiny", fsmVersion: "test" });
    expect(c.plan.settings.shard).toBe("none");
  });
});

describe("derivations", () => {
  it("devices = stages × data_parallel, or either from --devices and the other", () => {
    expect(compileSample("mlp", "cpu", { stages: 2, data_parallel: 2 }).settings.devices).toBe(4);
    const fromDevices = compileSample("mlp", "cpu", { stages: 2 }, 4).settings;
    expect([fromDevices.devices, fromDevices.dataParallel]).toEqual([4, 2]);
    const stages = compileSample("mlp", "cpu", { data_parallel: 2 }, 4).settings;
    expect(stages.stages).toBe(2);
    expect(compileError({ stages: 3 }, 4)).toContain("devices = 4 is not a multiple of stages = 3");
    expect(compileError({ stages: 2, data_parallel: 2, devices: 4 }, 8)).toContain("--devices 8 contradicts parallel.devices = 4");
  });

  it("schedule auto → 1f1b, chunks auto → stages, checkpoint auto → never, virtual stages auto → 1 (2 if interleaved)", () => {
    const s = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 1, shard: "none", schedule: "auto", checkpoint: "auto" }).settings;
    expect([s.schedule, s.microBatches, s.checkpoint, s.virtualStages, s.reshardAfterForward]).toEqual(["1f1b", 2, "never", 1, true]);
    const i = compileSample("mlp", "cpu", { stages: 2, data_parallel: 1, schedule: "interleaved" }).settings;
    expect(i.virtualStages).toBe(2);
  });

  it("settings that cannot make a plan are errors, not crashes", () => {
    // (What the checker already rejects never gets here; these pass it.)
    const chunks = compileError({ stages: 3, data_parallel: 1 });
    expect(chunks).toContain("batch = 32 does not split into data_parallel × chunks = 1 × 3");
    expect(chunks).toContain("chunks = auto is one micro-batch per pipeline rank");
    expect(compileError({ stages: 4, data_parallel: 1, chunks: 2, schedule: "interleaved" })).toContain("4 stages × 2 virtual stages = 8 exceeds the model's 6 layers");
    expect(compileError({ stages: 2, data_parallel: 1, chunks: 1, schedule: "interleaved" })).toContain("multiple of stages");
    expect(compileError({ balance: "[3, 3]", data_parallel: 1, chunks: 2, schedule: "interleaved", virtual_stages: 2 })).toContain("not implemented: an explicit balance with virtual_stages > 1");
  });
});

describe("stage splits", () => {
  it("splits layers evenly (the first stages take the remainder) or by balance", () => {
    expect(stageSizes(100, 16, undefined)).toEqual([7, 7, 7, 7, ...new Array(12).fill(6)]);
    expect(stageSizes(6, 3, [1, 2, 3])).toEqual([1, 2, 3]);
    const c = compileSample("mlp", "cpu", { balance: "[1, 2, 3]", data_parallel: 1, chunks: 4 });
    expect(c.stages.map((s) => [s.start, s.end])).toEqual([[0, 1], [1, 3], [3, 6]]);
  });

  it("interleaved: virtual stage k runs on pipeline rank k mod p, replicas on consecutive ranks", () => {
    const c = compileSample("mlp", "cpu", { stages: 2, data_parallel: 2, chunks: 2, schedule: "interleaved", virtual_stages: 3 });
    expect(c.stages.map((s) => s.pipeRank)).toEqual([0, 1, 0, 1, 0, 1]);
    expect(c.stages.map((s) => s.ranks)).toEqual([[0, 1], [2, 3], [0, 1], [2, 3], [0, 1], [2, 3]]);
    expect(c.plan.programs.map((p) => p.stages)).toEqual([[0, 2, 4], [1, 3, 5]]);
  });
});

describe("mesh derivation", () => {
  it("stages alone means one pipeline without data parallelism; fewer facts than that stays unknown", () => {
    expect(deriveMesh({ devices: undefined, stages: 3, dataParallel: undefined })).toEqual({ devices: 3, stages: 3, dataParallel: 1 });
    expect(deriveMesh({ devices: 8, stages: 2, dataParallel: undefined })).toEqual({ devices: 8, stages: 2, dataParallel: 4 });
    expect(deriveMesh({ devices: undefined, stages: undefined, dataParallel: 2 })).toEqual({ devices: undefined, stages: undefined, dataParallel: 2 });
  });
});
