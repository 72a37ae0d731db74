// bench/megatron: fsm's cost model against published Megatron-LM measurements on A100-80GB GPUs, and its plan
// search against the configurations Megatron's authors chose by hand.
//   - Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", arXiv
//     2205.05198, table 3 and figures 7–8; seq 2048, micro-batch 1): the 22B GPT (samples/gpt-22b.fsm) on 8
//     GPUs with tensor parallelism 8, global batch 4, 1.42 s per step with full recomputation; GPT-3 175B
//     (samples/gpt3-175b.fsm) on 64 GPUs, tensor 8 × pipeline 8 interleaved (3 virtual stages), global batch 64,
//     18.13 s with full recomputation; 175B's memory per GPU: 45.6 GiB of parameters and optimizer state,
//     66.8 GiB of activations without recomputation; and with sequence parallelism + selective recomputation
//     1.10 s and 13.75 s, 175B's activations 12.4 GiB. Selective recomputation recomputes the attention core
//     only, which fsm's fused attention does in every backward (it never stores the scores): those cases run
//     with no layer recomputed whole (the samples' @checkpoint dropped, layer_checkpoint = none).
//   - Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters"): GPT-3 175B on
//     1,024 A100s, global batch 1536, about 140 TFLOP/s per GPU, counted with their formula
//     96·B·s·l·h²·(1 + s/6h + V/16lh) (which includes the recomputed forward).
// Each case compiles the published configuration as explicit settings and prints published, predicted and
// their ratio; then the same model and cluster with every parallel setting `auto` (tensor_parallel
// included) and the searched plan's step time against the published configuration's.
// Prints one JSON object; run with `node dist/bench/megatron.js` after `npm run build`.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile, type CheckResult } from "../src/check/check.js";
import { compileModel, type Compiled } from "../src/compile/compile.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const GiB = 2 ** 30;
const samplePath = (name: string): string => join(root, "samples", `${name}.fsm`);
const sets = (o: Readonly<Record<string, string | number>>): string[] => Object.entries(o).map(([k, v]) => `${k.includes(".") ? k : `parallel.${k}`}=${v}`);

/** A sample checked with `--set` overrides; `withoutCheckpoint` drops its @checkpoint annotations (a model
 *  that keeps every layer's activations). */
function check(name: string, overrides: Readonly<Record<string, string | number>>, withoutCheckpoint = false): CheckResult {
  const path = samplePath(name);
  if (!withoutCheckpoint) return checkFile(path, { overrides: sets(overrides) });
  const lib = join(root, "samples", "lib", "transformer.fsm");
  const source = readFileSync(path, "utf8").replace(/@checkpoint\s+/g, "");
  const files = new Map([[path, source], [lib, readFileSync(lib, "utf8")]]);
  return checkFile(path, { overrides: sets(overrides), host: { readFile: (p) => files.get(resolve(p)) } });
}

function compile(name: string, devices: number, overrides: Readonly<Record<string, string | number>>, withoutCheckpoint = false): Compiled {
  const checked = check(name, overrides, withoutCheckpoint);
  if (!checked.model) throw new Error(`${name}: ${checked.diagnostics.map((d) => d.message).join("; ")}`);
  return compileModel(checked.model, { cluster: "a100-80g", devices, source: samplePath(name), fsmVersion: "bench" });
}

const ratio = (x: number): number => Number(x.toFixed(3));
const seconds = (x: number): number => Number(x.toFixed(3));
const gib = (x: number): number => Number((x / GiB).toFixed(2));

/** Megatron's FLOPs per step (Narayanan et al. eq. 3, recompute included). */
function megatronFlops(batch: number, seq: number, layers: number, d: number, vocab: number): number {
  return 96 * batch * seq * layers * d * d * (1 + seq / (6 * d) + vocab / (16 * layers * d));
}

function timed<T>(fn: () => T): { value: T; ms: number } {
  const t0 = performance.now();
  const value = fn();
  return { value, ms: Number((performance.now() - t0).toFixed(1)) };
}

/** The published configuration as explicit settings, then the search left to itself on the same cluster. */
function stepCase(x: { name: string; model: string; devices: number; published: number; settings: Record<string, string | number>; withoutCheckpoint?: boolean }) {
  const explicit = timed(() => compile(x.model, x.devices, x.settings, x.withoutCheckpoint));
  const predicted = explicit.value.plan.predicted.stepTimeSeconds;
  const batch = x.settings["train.batch"];
  const searched = timed(() =>
    compile(x.model, x.devices, {
      ...(batch !== undefined && { "train.batch": batch }),
      devices: x.devices,
      tensor_parallel: "auto",
      stages: "auto",
      data_parallel: "auto",
      chunks: "auto",
      schedule: "auto",
      checkpoint: "auto",
      shard: "auto",
      sequence_parallel: "auto",
    }, x.withoutCheckpoint),
  );
  const found = searched.value.plan.predicted.stepTimeSeconds;
  return {
    case: x.name,
    published: { stepSeconds: x.published },
    predicted: { stepSeconds: seconds(predicted), ratio: ratio(predicted / x.published), settings: x.settings, compileMs: explicit.ms },
    searched: { chosen: searched.value.plan.search?.chosen, stepSeconds: seconds(found), ratioToPublished: ratio(found / x.published), ratioToPredicted: ratio(found / predicted), compileMs: searched.ms },
  };
}

const FULL_RECOMPUTE = { layer_checkpoint: "all" };
// Sequence parallelism with selective recomputation: no layer recomputed whole.
const SP_SELECTIVE = { sequence_parallel: "true", layer_checkpoint: "none" };
// The sample leaves sequence parallelism to the search: the published configurations say it.
// Megatron-LM splits the 96 blocks evenly over the 24 model chunks (4 each), the embeddings on the first and
// the final norm and head on the last: the balance lists every virtual stage.
const MEGATRON_175B_BALANCE = `[${[6, ...new Array(22).fill(4), 6].join(",")}]`;
const MEGATRON_175B = { "train.batch": 64, tensor_parallel: 8, sequence_parallel: "false", stages: 8, virtual_stages: 3, data_parallel: 1, chunks: 64, schedule: "interleaved", checkpoint: "never", shard: "none", balance: MEGATRON_175B_BALANCE };

const cases = [
  stepCase({
    name: "22B, 8 A100s, tensor 8, batch 4, full recomputation (Korthikanti et al. 2022)",
    model: "gpt-22b",
    devices: 8,
    published: 1.42,
    settings: { tensor_parallel: 8, sequence_parallel: "false", stages: 1, data_parallel: 1, chunks: 4, schedule: "1f1b", checkpoint: "never", shard: "none", ...FULL_RECOMPUTE },
  }),
  stepCase({
    name: "GPT-3 175B, 64 A100s, tensor 8 × pipeline 8 interleaved (v=3), batch 64, full recomputation (Korthikanti et al. 2022)",
    model: "gpt3-175b",
    devices: 64,
    published: 18.13,
    settings: MEGATRON_175B,
  }),
  stepCase({
    name: "22B, 8 A100s, tensor 8, batch 4, sequence parallelism + selective recomputation (Korthikanti et al. 2022)",
    model: "gpt-22b",
    devices: 8,
    published: 1.1,
    settings: { tensor_parallel: 8, stages: 1, data_parallel: 1, chunks: 4, schedule: "1f1b", checkpoint: "never", shard: "none", ...SP_SELECTIVE },
  }),
  stepCase({
    name: "GPT-3 175B, 64 A100s, tensor 8 × pipeline 8 interleaved (v=3), batch 64, sequence parallelism + selective recomputation (Korthikanti et al. 2022)",
    model: "gpt3-175b",
    devices: 64,
    published: 13.75,
    settings: { ...MEGATRON_175B, ...SP_SELECTIVE },
    withoutCheckpoint: true,
  }),
];

// 175B's memory per GPU in the same configuration with no layer recomputed: model state, and the rest of
// the fullest device's peak (activations, their gradients, buffers) against the published activations.
function memoryCase(name: string, settings: Record<string, string | number>, published: { modelStateGiB: number; activationsGiB: number }) {
  const plan = compile("gpt3-175b", 64, { ...MEGATRON_175B, layer_checkpoint: "none", ...settings }, true).plan;
  const modelState = Math.max(...plan.predicted.modelStateBytes);
  const peak = Math.max(...plan.predicted.peakMemoryBytes);
  return {
    case: name,
    published,
    predicted: { modelStateGiB: gib(modelState), modelStateRatio: ratio(modelState / GiB / published.modelStateGiB), peakGiB: gib(peak), activationsAndBuffersGiB: gib(peak - modelState), activationsRatio: ratio((peak - modelState) / GiB / published.activationsGiB) },
  };
}
const memory = [
  memoryCase("GPT-3 175B, 64 A100s, tensor 8 × pipeline 8 interleaved: memory per GPU, activations kept", {}, { modelStateGiB: 45.6, activationsGiB: 66.8 }),
  memoryCase("GPT-3 175B, the same with sequence parallelism + selective recomputation", { sequence_parallel: "true" }, { modelStateGiB: 45.6, activationsGiB: 12.4 }),
];

// GPT-3 175B on 1,024 A100s, batch 1536, searched: TFLOP/s per GPU by Megatron's count against ~140.
const big = timed(() => compile("gpt3-175b", 1024, { devices: 1024, tensor_parallel: "auto", sequence_parallel: "auto", stages: "auto", data_parallel: "auto", chunks: "auto", schedule: "auto", checkpoint: "auto", shard: "auto" }));
const bigStep = big.value.plan.predicted.stepTimeSeconds;
const perGpu = megatronFlops(1536, 2048, 96, 12288, 51200) / bigStep / 1024 / 1e12;
const narayanan = {
  case: "GPT-3 175B, 1,024 A100s, batch 1536, searched (Narayanan et al. 2021: ~140 TFLOP/s per GPU)",
  published: { tflopsPerGpu: 140 },
  searched: { chosen: big.value.plan.search?.chosen, stepSeconds: seconds(bigStep), tflopsPerGpu: Number(perGpu.toFixed(1)), ratio: ratio(perGpu / 140), mfu: ratio(big.value.plan.predicted.mfu), compileMs: big.ms },
};

console.log(JSON.stringify({ bench: "megatron", cluster: "a100-80g", cases, memory, narayanan }, null, 2));
