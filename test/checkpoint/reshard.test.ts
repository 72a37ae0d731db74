// Resharding: a checkpoint of one plan resumes into another plan of the model (other device count, stages,
// shard strategy). The values move exactly (the new plan, saved again at once, consolidates to the same bytes
// as the old checkpoint, optimizer state included), and training continues as the uninterrupted run does up
// to the new plan's reduction order. What cannot continue the same run is refused.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { consolidate } from "../../src/checkpoint/consolidate.js";
import { readSafetensors } from "../../src/checkpoint/safetensors.js";
import { compileModel } from "../../src/compile/compile.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { createEngine } from "../../src/runtime/engines.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { runCli as run } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";

const root = mkdtempSync(join(tmpdir(), "fsm-reshard-"));

type Settings = Record<string, string | number>;

function planFor(o: Settings, devices: number): Plan {
  const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ checkpoint: "never", ...o }) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: "gpt-tiny", fsmVersion: "test" }).plan;
}

async function train(plan: Plan, steps: number, extra: Parameters<typeof runPlan>[1] = {}): Promise<{ losses: number[]; params: Map<string, Float32Array>; scales: number[] }> {
  const out = { losses: [] as number[], params: new Map<string, Float32Array>(), scales: [] as number[] };
  await runPlan(plan, {
    steps,
    engine: "native",
    ...extra,
    onStep: (r) => {
      out.losses.push(r.loss);
      if (r.lossScale !== undefined) out.scales.push(r.lossScale);
    },
    onDone: (e) => plan.graph.params.forEach((p) => out.params.set(p.name, e.param(p.name))),
  });
  return out;
}

function floats(t: { data: Uint8Array }): number[] {
  return Array.from(new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength)));
}

function expectClose(actual: readonly number[], expected: readonly number[], rtol: number, what: string, atol = 1e-6): void {
  expect(actual.length, what).toBe(expected.length);
  const worst = actual.reduce((w, a, i) => Math.max(w, Math.abs(a - expected[i]!) / (Math.abs(expected[i]!) * rtol + atol)), 0);
  expect(worst, what).toBeLessThanOrEqual(1);
}

const FSDP_2x2: [Settings, number] = [{ stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4];
const ONE: [Settings, number] = [{ stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1];
const OSS_1x2: [Settings, number] = [{ stages: 1, data_parallel: 2, chunks: 2, shard: "oss" }, 2];
const SDDP_1x4: [Settings, number] = [{ stages: 1, data_parallel: 4, chunks: 1, shard: "sddp" }, 4];
const PIPE_3: [Settings, number] = [{ stages: 3, data_parallel: 1, chunks: 2, shard: "none" }, 3];

describe("resharding a checkpoint into another plan", () => {
  const pairs: [string, [Settings, number], [Settings, number]][] = [
    ["fsdp 2 stages × 2 replicas → 1 device", FSDP_2x2, ONE],
    ["1 device → sddp 4 replicas", ONE, SDDP_1x4],
    ["oss 2 replicas → 3 pipeline stages", OSS_1x2, PIPE_3],
    // Under hybrid sharding ranks 0 and 2 (1 and 3) hold the same shards: each value is read from one of them.
    ["fsdp in shard groups of 2 over 4 replicas with no_sync → fsdp 2 stages × 2", [{ stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp", shard_group: 2, no_sync: "true", fsdp_min_params: 5000 }, 4], FSDP_2x2],
    // Tensor-parallel slices joined into whole tensors, and cut again for another degree.
    ["tensor parallel 2 × fsdp 2 replicas → 1 device", [{ tensor_parallel: 2, stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4], ONE],
    ["1 device → tensor parallel 4, sequence parallel", ONE, [{ tensor_parallel: 4, sequence_parallel: "true", stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 4]],
    ["tensor parallel 2 × 2 stages → tensor parallel 4 × oss 2 replicas", [{ tensor_parallel: 2, stages: 2, data_parallel: 1, chunks: 2, shard: "none" }, 4], [{ tensor_parallel: 4, stages: 1, data_parallel: 2, chunks: 2, shard: "oss" }, 8]],
    ["interleaved 2 stages × 2 virtual → fsdp 2 replicas, gathered weights kept", [{ stages: 2, data_parallel: 1, chunks: 4, shard: "none", schedule: "interleaved", virtual_stages: 2 }, 2], [{ stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp", reshard_after_forward: "false" }, 2]],
  ];
  for (const [title, [a, na], [b, nb]] of pairs) {
    it(`${title}: every value moves exactly, and 5 + resume + 5 steps track the uninterrupted 10`, async () => {
      const from = planFor(a, na);
      const to = planFor(b, nb);
      const dir = join(root, title.replace(/\W+/g, "-"));
      const whole = await train(from, 10);
      await train(from, 5, { save: { dir } });

      // Exactly: load into the new plan, save at once, and both checkpoints consolidate to the same bytes.
      const engine = createEngine("native", to, graphFromJson(to.model.name, to.graph), to.run!.seed);
      expect(engine.checkpoint!.load(dir)).toEqual({ step: 5, devices: na, resharded: true, unverified: [] });
      const again = join(dir, "resaved");
      await engine.checkpoint!.save(again, 5);
      consolidate(dir, join(dir, "old.safetensors"), { optimizer: true });
      consolidate(again, join(dir, "new.safetensors"), { optimizer: true });
      const old = readSafetensors(join(dir, "old.safetensors")).tensors;
      const moved = readSafetensors(join(dir, "new.safetensors")).tensors;
      expect([...moved.keys()].sort()).toEqual([...old.keys()].sort());
      for (const [name, t] of old) expect(floats(moved.get(name)!), name).toEqual(floats(t));
      // The step counter too (Adam's bias correction).
      const counter = (d: string): number[] => floats(readSafetensors(join(d, "step-000005", "rank-00000.safetensors")).tensors.get("optimizer.step")!);
      expect(counter(again)).toEqual(counter(dir));

      // Training continues as the uninterrupted run: same data position, same optimizer state.
      const second = await train(to, 5, { resume: dir });
      expectClose(second.losses, whole.losses.slice(5), 1e-5, "losses of steps 6..10");
      // Adam divides by sqrt(v): near-zero gradients' summation-order differences move weights by ~1e-6.
      for (const [p, v] of whole.params) expectClose(Array.from(second.params.get(p)!), Array.from(v), 1e-4, p, 1e-5);
    }, 120_000);
  }

  it("fp16 with dynamic loss scaling: sddp 2 replicas → fsdp 2 stages × 2; the loss scale carries over", async () => {
    const from = planFor({ ...OSS_1x2[0], shard: "sddp", "train.precision": "fp16" }, 2);
    const to = planFor({ ...FSDP_2x2[0], "train.precision": "fp16" }, 4);
    const dir = join(root, "fp16");
    const whole = await train(from, 8);
    await train(from, 4, { save: { dir } });
    const second = await train(to, 4, { resume: dir });
    expect(second.scales).toEqual(whole.scales.slice(4));
    expectClose(second.losses, whole.losses.slice(4), 1e-3, "fp16 losses of steps 5..8");
  }, 120_000);

  it("refuses what would not continue the same run: another batch, seed, optimizer or model shape", async () => {
    const dir = join(root, "refuse");
    await train(planFor(...FSDP_2x2), 2, { save: { dir } });
    const fail = async (o: Settings, devices: number): Promise<string> => {
      try {
        await train(planFor(o, devices), 1, { resume: dir });
      } catch (e) {
        return (e as Error).message;
      }
      return "no error";
    };
    expect(await fail({ ...ONE[0], "train.batch": 16 }, 1)).toMatch(/trained with batch 8; this plan has batch 16: resuming would read different samples/);
    expect(await fail({ ...ONE[0], "train.seed": 7 }, 1)).toMatch(/trained with seed 1; this plan has seed 7/);
    expect(await fail({ ...ONE[0], "train.optimizer": "sgd(lr: 0.1, momentum: 0.9)" }, 1)).toMatch(/no optimizer state 'momentum' \(saved: exp_avg, exp_avg_sq; another optimizer\?\)/);
    expect(await fail(...ONE)).toBe("no error");
    // A rank file replaced by another rank's is named by what its metadata says (elements no rank holds would
    // follow: integrity.test.ts checks that gap too).
    const rank3 = join(dir, "step-000002", "rank-00003.safetensors");
    const saved = readFileSync(rank3);
    writeFileSync(rank3, readFileSync(join(dir, "step-000002", "rank-00000.safetensors")));
    expect(await fail(...ONE)).toMatch(/rank-00003\.safetensors says it is rank 0, but \S+latest\.json names it as rank 3's file/);
    writeFileSync(rank3, saved);
  }, 120_000);

  it("through the CLI: a 4-device fsdp checkpoint resumes on 2 devices", async () => {
    const dir = join(root, "cli");
    const a = await run("run", samplePath("gpt-tiny"), "--devices", "4", ...sets({ stages: 2, data_parallel: 2, shard: "fsdp" }).flatMap((s) => ["--set", s]), "--steps", "3", "--save", dir, "--json");
    expect(a.code, a.stderr).toBe(0);
    const b = await run("run", samplePath("gpt-tiny"), "--devices", "2", ...sets({ stages: 1, data_parallel: 2, shard: "oss" }).flatMap((s) => ["--set", s]), "--steps", "2", "--resume", dir, "--save", dir, "--save-every", "2");
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toContain(`resumed from ${dir} after step 3, resharded from a plan of 4 devices\n`);
    // Steps count on from the checkpoint's (and so does --save-every: step 4, then the last, 5).
    expect(b.stdout).toMatch(/^step 4\/5  loss .*\nstep 5\/5  loss /m);
    expect(readdirSync(dir).filter((n) => n.startsWith("step-")).sort()).toEqual(["step-000003", "step-000004", "step-000005"]);
    expect((JSON.parse(readFileSync(join(dir, "latest.json"), "utf8")) as { step: number }).step).toBe(5);
  }, 120_000);
});
