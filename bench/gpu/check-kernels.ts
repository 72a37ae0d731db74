// GPU check, part 1 (bench/gpu/check.sh): every CUDA kernel against a reference on one training step of real
// models — f32 operands (TF32 off) at rtol 1e-4 / atol 1e-5, then bf16 operands at rtol 1e-2 / atol 5e-2 of the
// output's RMS (bf16 keeps 8 bits; the reference computes on the same rounded values) — and which CPU kernels
// the CUDA device lacks. Prints one JSON object; exit 0 when every comparison passes.
import { resolve } from "node:path";
import { checkFile } from "../../src/check/check.js";
import type { Graph } from "../../src/graph/graph.js";
import { nativeKernelNames, type NativeKernelDevice } from "../../src/native/binding.js";
import { compareKernels } from "../../src/native/kernel-parity.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";

const root = resolve(import.meta.dirname, "../../..");
const device = (process.argv[2] ?? "cuda") as NativeKernelDevice;
// "small": the samples alone (a rehearsal on the emulated device, where real sizes take too long).
const small = process.argv[3] === "small";

function graphOf(file: string): Graph {
  const r = checkFile(resolve(root, file));
  if (!r.model) throw new Error(`${file}: ${r.diagnostics.map((d) => d.message).join("; ")}`);
  return buildTrainingGraph(r.model.graph, r.model.train!);
}

// [file, batch, seq, reference]: the small samples against the interpreter; real sizes against the CPU kernels.
const CASES: [string, number, number | undefined, "interpreter" | "cpu"][] = [
  ["samples/mlp.fsm", 8, undefined, "interpreter"],
  ["samples/gpt-tiny.fsm", 4, 16, "interpreter"],  // its positions table holds 16
  ["bench/gpu/models/llama-small.fsm", 1, 256, "cpu"],
  ["bench/gpu/models/gpt2-slice.fsm", 1, 512, "cpu"],
];

const results: unknown[] = [];
let ok = true;
for (const [file, batch, seq, reference] of small ? CASES.filter((c) => c[0].startsWith("samples/")) : CASES) {
  const g = graphOf(file);
  for (const operands of ["f32", "bf16"] as const) {
    const t0 = performance.now();
    try {
      const r = compareKernels(g, { batch, ...(seq !== undefined && { seq }), device, operands, reference });
      ok &&= r.mismatches.length === 0;
      results.push({ file, operands, reference, compared: r.compared, seconds: (performance.now() - t0) / 1e3, worstByOp: Object.fromEntries(r.worstByOp), mismatches: r.mismatches });
    } catch (e) {
      ok = false;
      results.push({ file, operands, reference, error: e instanceof Error ? e.message : String(e) });
    }
    process.stderr.write(`kernels: ${file} ${operands} done\n`);
  }
}
const have = new Set(nativeKernelNames(device));
const missing = nativeKernelNames("cpu").filter((op) => !have.has(op));
ok &&= missing.length === 0;
process.stdout.write(JSON.stringify({ check: "kernels", device, ok, missing, results }) + "\n");
process.exitCode = ok ? 0 : 1;
