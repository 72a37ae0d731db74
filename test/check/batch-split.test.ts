// A loss that mixes samples (softmax over B): a warning while nothing splits the batch, an error where the
// parallel settings split it, and compile refuses a plan that splits it (src/check/batch-split.ts).
import { describe, expect, it } from "vitest";
import { compileModel } from "../../src/compile/compile.js";
import { CompileError } from "../../src/compile/errors.js";
import { checkSources, model } from "./helpers.js";

const source = (parallel = "") =>
  model("  fc = linear(4, 4)", "    return mse_loss(softmax(fc(x), dim: 0), y)") +
  "train {\n  batch = 8, optimizer = sgd(lr: 0.1)\n}\n" +
  (parallel ? `parallel {\n  ${parallel}\n}\n` : "");
const check = (parallel?: string, overrides: string[] = []) => checkSources({ "m.fsm": source(parallel) }, "m.fsm", { overrides });
const summary = (r: ReturnType<typeof check>) => r.diagnostics.map((d) => `${d.severity} ${d.code} ${d.span.line}:${d.span.column}`);

describe("a loss that mixes samples", () => {
  it("warns when the settings split nothing, and the model still checks", () => {
    const r = check();
    expect(summary(r)).toEqual(["warning FSM506 4:21"]);
    expect(r.model?.sampleMixing?.why).toMatch(/softmax over dim 0/);
  });

  it.each([["data_parallel = 2"], ["chunks = 4"], ["devices = 2, stages = 1"]])("is an error under %s", (parallel) => {
    const r = check(parallel);
    expect(summary(r)).toEqual(["error FSM506 4:21"]);
    expect(r.diagnostics[0]!.notes?.[0]).toMatch(/is set at m\.fsm:\d+:\d+/);
  });

  it("is an error under --set parallel.chunks=2, and fine under stages only", () => {
    expect(summary(check(undefined, ["parallel.chunks=2"]))).toEqual(["error FSM506 4:21"]);
    expect(summary(check("devices = 1, chunks = 1"))).toEqual(["warning FSM506 4:21"]);
  });

  it("compiles for one device and refuses a plan over 2 data-parallel replicas", () => {
    const m = check().model!;
    const options = { cluster: "cpu", source: "m.fsm", fsmVersion: "test" };
    expect(compileModel(m, { ...options, devices: 1 }).settings.dataParallel).toBe(1);
    expect(() => compileModel(m, { ...options, devices: 2 })).toThrow(CompileError);
    expect(() => compileModel(m, { ...options, devices: 2 })).toThrow(/^m\.fsm:4:21: softmax over dim 0 .*2 data-parallel replicas × 1 micro-batch/);
  });
});
