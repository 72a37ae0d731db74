// Which device kind fsm run picks (src/runtime/device-choice.ts): what was asked for, else a GPU plan on a GPU,
// else CPU devices with a note saying why; --device cuda where no GPU can run is an error naming the reason.
import { describe, expect, it } from "vitest";
import { chooseDevice, cudaUnavailable, DeviceChoiceError } from "../../src/runtime/device-choice.js";
import { compileSample } from "../compile/helpers.js";

const cpuPlan = compileSample("mlp", "cpu", {}, 1).plan;
const gpuPlan = compileSample("mlp", "h100-sxm", {}, 1).plan;
const noGpu = cudaUnavailable();

describe("device choice", () => {
  it("a CPU plan runs on CPU devices, and an explicit kind is taken as asked", () => {
    expect(chooseDevice(cpuPlan)).toEqual({ kind: "cpu" });
    expect(chooseDevice(gpuPlan, "simt")).toEqual({ kind: "simt" });
    expect(chooseDevice(gpuPlan, "cpu")).toEqual({ kind: "cpu" });
  });

  it.skipIf(noGpu === undefined)("without a GPU: a GPU plan runs on CPU devices with a note, and --device cuda is refused with the reason", () => {
    expect(chooseDevice(gpuPlan)).toEqual({ kind: "cpu", note: `the plan is for h100-sxm GPUs, but here: ${noGpu}; running on CPU virtual devices` });
    expect(noGpu).toMatch(/^no CUDA device \(|^this fsm was built without CUDA/);
    expect(() => chooseDevice(cpuPlan, "cuda")).toThrow(DeviceChoiceError);
    expect(() => chooseDevice(cpuPlan, "cuda")).toThrow(`--device cuda: ${noGpu}`);
  });

  it.skipIf(noGpu !== undefined)("with a GPU: a GPU plan runs on it", () => {
    expect(chooseDevice(gpuPlan)).toEqual({ kind: "cuda" });
  });
});
