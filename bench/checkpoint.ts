// bench/checkpoint: checkpoint I/O at a real model size — gpt2-124m (124M parameters, Adam: weights and two
// state tensors, ~1.5 GB in fp32) on 4 virtual devices with FSDP. Per phase, seconds and bytes per second:
//   - save: every device's shard written (fsync'd) and the manifest published;
//   - resume into the same plan (slot by slot) and into another plan, 2 stages × 1 replica with OSS on 2
//     devices (every tensor assembled from the FSDP shards and written where that plan keeps it);
//   - consolidate (weights and optimizer state into one file, streaming).
// No training step runs (a gpt2-124m step takes about a minute on 2 cores): the engines hold their initial
// values, which is what is moved. Prints one JSON object; run with `npm run bench:checkpoint`.
import { mkdtempSync, rmSync, statSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkFile } from "../src/check/check.js";
import { consolidate } from "../src/checkpoint/consolidate.js";
import { compileModel } from "../src/compile/compile.js";
import { graphFromJson } from "../src/plan/graph-from-json.js";
import type { Plan } from "../src/plan/plan.js";
import { createEngine } from "../src/runtime/engines.js";

const SMALL = ["train.batch=4", "train.seq=64", "parallel.checkpoint=never"];

function plan(devices: number, overrides: readonly string[]): Plan {
  const model = checkFile("samples/gpt2-124m.fsm", { overrides: [...SMALL, ...overrides] }).model;
  if (!model) throw new Error("samples/gpt2-124m.fsm failed to check");
  return compileModel(model, { cluster: "cpu", devices, source: "samples/gpt2-124m.fsm", fsmVersion: "bench" }).plan;
}

function engine(p: Plan): ReturnType<typeof createEngine> {
  return createEngine("native", p, graphFromJson(p.model.name, p.graph), p.run!.seed);
}

function timed<T>(f: () => T): { value: T; seconds: number } {
  const t0 = performance.now();
  const value = f();
  return { value, seconds: (performance.now() - t0) / 1000 };
}

async function timedAsync<T>(f: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const t0 = performance.now();
  const value = await f();
  return { value, seconds: (performance.now() - t0) / 1000 };
}

function bytesUnder(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((n, e) => n + (e.isDirectory() ? bytesUnder(join(dir, e.name)) : statSync(join(dir, e.name)).size), 0);
}

const dir = mkdtempSync(join(tmpdir(), "fsm-bench-ckpt-"));
try {
  const fsdp = plan(4, ["parallel.shard=fsdp", "parallel.stages=1", "parallel.data_parallel=4", "parallel.chunks=1"]);
  const oss = plan(2, ["parallel.shard=oss", "parallel.stages=2", "parallel.data_parallel=1", "parallel.chunks=2"]);
  const a = engine(fsdp);
  // Saving is asynchronous (processes exchange pids and wait at barriers): timed to the manifest's publication.
  const save = await timedAsync(() => a.checkpoint!.save(dir, 0));
  const saved = bytesUnder(dir);
  const same = engine(fsdp);
  const resume = timed(() => same.checkpoint!.load(dir));
  const other = engine(oss);
  const reshard = timed(() => other.checkpoint!.load(dir));
  const out = join(dir, "model.safetensors");
  const merged = timed(() => consolidate(dir, out, { optimizer: true }));
  const mb = (bytes: number, s: number): number => Math.round(bytes / 1e6 / s);
  console.log(
    JSON.stringify(
      {
        model: "gpt2-124m",
        parameters: fsdp.model.parameters,
        checkpointBytes: saved,
        save: { plan: "fsdp pp=1 dp=4", seconds: +save.seconds.toFixed(2), mbPerSecond: mb(saved, save.seconds) },
        resumeSamePlan: { seconds: +resume.seconds.toFixed(2), mbPerSecond: mb(saved, resume.seconds), resharded: resume.value.resharded },
        resumeResharded: { plan: "oss pp=2 dp=1 (2 devices)", seconds: +reshard.seconds.toFixed(2), mbPerSecond: mb(saved, reshard.seconds), resharded: reshard.value.resharded },
        consolidate: { seconds: +merged.seconds.toFixed(2), bytes: merged.value.bytes, tensors: merged.value.tensors, mbPerSecond: mb(merged.value.bytes, merged.seconds) },
      },
      null,
      2,
    ),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
