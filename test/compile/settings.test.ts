// Settings resolution: the few derivations compile makes by itself, and a clear error for every other `auto`.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { CompileError } from "../../src/compile/errors.js";
import { stageSizes } from "../../src/compile/stages.js";
import { deriveMesh } from "../../src/compile/resolve.js";
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
  it("the search needs the device count: without it, the error says how to give it", () => {
    for (const overrides of [{}, { data_parallel: 2 }] as Record<string, number>[]) {
      const m = compileError(overrides);
      expect(m).toContain("the plan search needs the number of devices");
      expect(m).toContain("--devices N");
    }
  });

  it("shard auto with replicas to shard over is the search's choice, recorded in the plan", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2 });
    expect(["none", "oss", "sddp", "fsdp"]).toContain(c.plan.settings.shard);
    expect(c.plan.search).toBeDefined();
    expect(c.plan.search!.chosen).toContain(`shard=${c.plan.settings.shard}`);
    expect(c.plan.search!.candidates.filter((x) => x.status === "chosen")).toHaveLength(1);
  });

  it("shard auto is none without data parallelism (a group of one has nothing to shard)", () => {
    const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 2, data_parallel: 1, chunks: 2, checkpoint: "never" }) }).model!;
    const c = compileModel(model, { cluster: "cpu", source: "gpt-tiny", fsmVersion: "test" });
    expect(c.plan.settings.shard).toBe("none");
    // Nothing else was auto: the explicit path, no search record.
    expect(c.plan.search).toBeUndefined();
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

  it("settings left auto are chosen within the ones given: schedule, chunks, checkpoint, virtual stages", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 1, shard: "none", schedule: "auto", checkpoint: "auto" });
    const s = c.settings;
    expect([s.stages, s.dataParallel, s.shard]).toEqual([2, 1, "none"]);
    expect(8 % s.microBatches).toBe(0);
    expect(c.plan.search!.chosen).toBe(c.plan.search!.candidates.find((x) => x.status === "chosen")!.settings);
    const i = compileSample("mlp", "cpu", { stages: 2, data_parallel: 1, schedule: "interleaved" }).settings;
    expect(i.schedule).toBe("interleaved");
    expect([2, 4]).toContain(i.virtualStages);
    expect(i.microBatches % 2).toBe(0);
  });

  it("settings that cannot make a plan are errors, not crashes", () => {
    // (What the checker already rejects never gets here; these pass it.)
    expect(compileError({ stages: 2, data_parallel: 1, chunks: 1, schedule: "interleaved", virtual_stages: 2 })).toContain("multiple of stages");
    // Left to the search, the same requests find no candidate, and say why.
    const searched = compileError({ stages: 3, data_parallel: 1, chunks: 2, schedule: "interleaved" });
    expect(searched).toContain("pp=3 dp=1: no candidate meets the given settings");
  });
});

describe("stage splits", () => {
  it("splits layers evenly (the first stages take the remainder) or by balance", () => {
    expect(stageSizes(100, 16, undefined)).toEqual([7, 7, 7, 7, ...new Array(12).fill(6)]);
    expect(stageSizes(6, 3, [1, 2, 3])).toEqual([1, 2, 3]);
    const c = compileSample("mlp", "cpu", { balance: "[1, 2, 3]", data_parallel: 1, chunks: 4 });
    expect(c.stages.map((s) => [s.start, s.end])).toEqual([[0, 1], [1, 3], [3, 6]]);
  });

  it("interleaved: a balance lists every virtual stage (Megatron-LM's model chunks), explicit or searched", () => {
    const c = compileSample("mlp", "cpu", { balance: "[1, 2, 2, 1]", data_parallel: 1, chunks: 2, schedule: "interleaved", virtual_stages: 2 });
    expect([c.settings.stages, c.settings.virtualStages]).toEqual([2, 2]);
    expect(c.stages.map((s) => [s.start, s.end, s.pipeRank])).toEqual([[0, 1, 0], [1, 3, 1], [3, 5, 0], [5, 6, 1]]);
    // Left to the search with the depth given, only interleaving at that depth can take the balance.
    const searched = compileSample("mlp", "cpu", { balance: "[1, 2, 2, 1]", data_parallel: 1, virtual_stages: 2, schedule: "auto" });
    expect([searched.settings.schedule, searched.settings.virtualStages, searched.settings.stages]).toEqual(["interleaved", 2, 2]);
    expect(searched.stages.map((s) => s.end - s.start)).toEqual([1, 2, 2, 1]);
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
