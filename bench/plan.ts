// bench/plan: time to compile GPT-3 175B into a plan for 1024 H200s with explicit settings (16 pipeline
// stages × 64 data-parallel, 24 micro-batches, 1F1B, OSS), and the plan's size. Prints one JSON object; run
// with `node dist/bench/plan.js` after `npm run build`. Aim: the compile (from the checked model) under a second.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { planToJson } from "../src/plan/serialize.js";
import { medianMs } from "./timing.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const path = join(root, "samples", "gpt3-175b.fsm");
const overrides = ["parallel.stages=16", "parallel.data_parallel=64", "parallel.chunks=24", "parallel.schedule=1f1b", "parallel.shard=oss"];
const model = checkFile(path, { overrides }).model;
if (!model) throw new Error(`${path} failed to check with ${overrides.join(" ")}`);
const options = { cluster: "h200", source: path, fsmVersion: "bench" };

const compiled = compileModel(model, options);
const plan = compiled.plan;
const json = planToJson(plan);
const compileMs = medianMs(() => compileModel(model, options), 5);
const aimMs = 1000;

console.log(
  JSON.stringify(
    {
      bench: "plan",
      node: process.version,
      model: "gpt3-175b.fsm",
      settings: overrides,
      cluster: `${plan.cluster.profile} × ${plan.cluster.devices}`,
      programs: plan.programs.length,
      actions: plan.programs.reduce((n, p) => n + p.actions.length, 0),
      buffers: plan.memory.reduce((n, m) => n + m.buffers.length, 0),
      graphOps: plan.graph.ops.length,
      planBytes: Buffer.byteLength(json),
      checkMs: medianMs(() => checkFile(path, { overrides }), 3),
      compileMs,
      serializeMs: medianMs(() => planToJson(plan), 5),
      predicted: {
        stepTimeSeconds: plan.predicted.stepTimeSeconds,
        bubbleFraction: plan.predicted.bubbleFraction,
        exposedCommSeconds: plan.predicted.exposedCommSeconds,
        maxPeakMemoryGiB: Math.max(...plan.predicted.peakMemoryBytes) / 2 ** 30,
        tokensPerSecond: plan.predicted.tokensPerSecond,
        mfu: plan.predicted.mfu,
      },
      aimMs,
      withinAim: compileMs < aimMs,
    },
    null,
    2,
  ),
);
