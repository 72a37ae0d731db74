// The device kinds as a user meets them on a machine without a GPU (these machines, and CI): asking for cuda
// is exit 1 with the reason, never a crash; a kind that does not exist is a usage error.
import { describe } from "vitest";
import { nativeGpuKind } from "../../src/native/binding.js";
import { hostileCases, sample } from "./harness.js";

// On a machine with a GPU, --device cuda runs: only its refusal without one is a hostile case.
const noGpu = (nativeGpuKind("cuda")?.devices ?? 0) === 0;

describe("device kinds", () => hostileCases([
  ...(noGpu ? [{ name: "--device cuda without a GPU", argv: ["run", sample("gpt-tiny.fsm"), "--device", "cuda", "--steps", "1"], message: /gpt-tiny\.fsm: error: --device cuda: (no CUDA device|this fsm was built without CUDA)/ }] : []),
  { name: "--device of a kind that does not exist", argv: ["run", sample("gpt-tiny.fsm"), "--device", "tpu"], code: 2, message: /--device must be one of cpu, cuda, simt, got 'tpu'/ },
  { name: "--device simt with another engine", argv: ["run", sample("gpt-tiny.fsm"), "--device", "simt", "--engine", "reference"], code: 2, message: /--device simt runs the native engine only, not --engine reference/ },
]));
