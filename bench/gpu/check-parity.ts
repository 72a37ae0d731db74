// GPU check, part 2 (bench/gpu/check.sh): gpt-tiny and mlp plans — 1 device, 2 devices pipelined, FSDP over 2
// devices, tensor parallel 2 (virtual devices sharing the one GPU) — trained 10 steps on the device kind and on CPU virtual
// devices: every step's loss within rtol 1e-4 (fp32, TF32 off). Prints one JSON object; exit 0 when all pass.
import { resolve } from "node:path";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import type { DeviceKind } from "../../src/runtime/device-choice.js";
import { planParity } from "./plan-parity.js";

const root = resolve(import.meta.dirname, "../../..");
const device = (process.argv[2] ?? "cuda") as DeviceKind;
const steps = Number(process.argv[3] ?? 10);

// Adam's default eps makes gradients that are zero in exact arithmetic into full steps of either sign; a
// larger one keeps the comparison about the kernels, not rounding noise.
const ADAM = "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)";
const SHAPES: [string, Record<string, string>, number][] = [
  ["1 device", { stages: "1", data_parallel: "1", chunks: "1", shard: "none" }, 1],
  ["2 stages pipelined", { stages: "2", data_parallel: "1", chunks: "2", shard: "none", schedule: "1f1b" }, 2],
  ["fsdp over 2 devices", { stages: "1", data_parallel: "2", chunks: "2", shard: "fsdp" }, 2],
  ["tensor parallel 2", { tensor_parallel: "2", stages: "1", data_parallel: "1", chunks: "1", shard: "none" }, 2],
];

const results: unknown[] = [];
let ok = true;
for (const sample of ["gpt-tiny", "mlp"]) {
  for (const [name, o, devices] of SHAPES) {
    try {
      const overrides = Object.entries({ checkpoint: "never", "train.optimizer": ADAM, "train.precision": "fp32", ...o }).map(([k, v]) => `${k.includes(".") ? k : `parallel.${k}`}=${v}`);
      const model = checkFile(resolve(root, `samples/${sample}.fsm`), { overrides }).model!;
      const plan = compileModel(model, { cluster: "cpu", devices, source: sample, fsmVersion: "gpu-check" }).plan;
      const r = await planParity(plan, steps, device);
      ok &&= r.ok;
      results.push({ sample, shape: name, ...r });
    } catch (e) {
      ok = false;
      results.push({ sample, shape: name, error: e instanceof Error ? e.message : String(e) });
    }
    process.stderr.write(`parity: ${sample} ${name} done\n`);
  }
}
process.stdout.write(JSON.stringify({ check: "parity", device, steps, ok, results }) + "\n");
process.exitCode = ok ? 0 : 1;
