// Failures of `fsm run` as a user meets them: an error on one device — a kernel or communication failure and
// a NaN loss injected with --inject-fault, an arena larger than the device's memory (injected, or a plan whose
// device memory is too small) — stops every device with one error naming the step, the device and the action
// (or micro-batch, or arena and memory), promptly (the peers are aborted, not left to the communicator's 60 s
// timeout), with no checkpoint of the failed step, and exit code 1; a bad fault spec is a usage error (exit 2).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { planToJson } from "../../src/plan/serialize.js";
import { createEngine, EngineError } from "../../src/runtime/engines.js";
import { runCli as run } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";

const root = mkdtempSync(join(tmpdir(), "fsm-failures-"));
const tiny = samplePath("gpt-tiny");
// 2 pipeline stages × 2 FSDP replicas: stage 0 on devices 0 and 1, stage 1 (the losses) on devices 2 and 3.
const SHAPE = { stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2 };
const FSDP_2X2 = ["--devices", "4", ...sets(SHAPE).flatMap((s) => ["--set", s])];
// Far below the in-process communicator's 60 s timeout: a device left waiting would take that long.
const PROMPT_MS = 15_000;

let plan: string; // the 4-device plan, compiled once

beforeAll(async () => {
  plan = join(root, "tiny4.json");
  const c = await run("compile", tiny, ...FSDP_2X2, "-o", plan);
  expect(c.code, c.stderr).toBe(0);
  const p = JSON.parse(readFileSync(plan, "utf8")) as Plan;
  expect(p.programs.map((x) => x.ranks)).toEqual([[0, 1], [2, 3]]); // the device numbers below rely on it
});

/** Runs fsm and times it. */
async function timed(...argv: string[]): Promise<Awaited<ReturnType<typeof run>> & { ms: number }> {
  const t0 = performance.now();
  const r = await run(...argv);
  return { ...r, ms: performance.now() - t0 };
}

const stepsReported = (stdout: string): number[] =>
  stdout
    .trim()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { step?: number })
    .flatMap((l) => (l.step === undefined ? [] : [l.step]));

/** The one line `fsm run` writes on a failure. */
function oneError(stderr: string): string {
  const lines = stderr.trimEnd().split("\n");
  expect(lines, stderr).toHaveLength(1);
  return lines[0]!;
}

describe("fsm run --inject-fault: one device fails, every device stops", () => {
  it("kernel: device 1's compute kernel fails at step 2; one error names the step, device and action; exit 1", async () => {
    const r = await timed("run", plan, "--steps", "4", "--json", "--inject-fault", "kernel@1:2");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(/^\S+tiny4\.json: error: step 2: device 1, action 0[FBRIW]\d+: kernel [a-z_]+ failed: injected fault$/);
    expect(stepsReported(r.stdout)).toEqual([1]);
    expect(r.stdout).not.toContain("summary");
    expect(r.ms).toBeLessThan(PROMPT_MS);
  });

  it("comm: device 2's collective or send/recv fails at step 1; its peers waiting on it are aborted", async () => {
    const r = await timed("run", plan, "--steps", "3", "--json", "--inject-fault", "comm@2");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(
      /^\S+: error: step 1: device 2, action 1(ALL_GATHER|REDUCE_SCATTER|ALL_REDUCE|BROADCAST|REDUCE|SEND_F|RECV_F|SEND_B|RECV_B)[\w@]*: communication comm\.[a-zA-Z]+ failed: injected fault$/,
    );
    expect(stepsReported(r.stdout)).toEqual([]);
    expect(r.ms).toBeLessThan(PROMPT_MS);
  });

  it("nan: the prediction a last-stage device's loss reads turns NaN at step 2; the error names device and micro-batch", async () => {
    const r = await timed("run", plan, "--steps", "3", "--json", "--inject-fault", "nan@3:2");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(/^\S+: error: step 2: device 3, micro-batch 0: the loss is NaN \(training diverged or the data is bad/);
    expect(stepsReported(r.stdout)).toEqual([1]);
  });

  it("nan: a NaN in a first-stage forward flows through the pipeline into its replica's loss (device 0 → device 2)", async () => {
    const r = await timed("run", tiny, ...FSDP_2X2, "--steps", "2", "--inject-fault", "nan@0");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(/^\S+gpt-tiny\.fsm: error: step 1: device 2, micro-batch 0: the loss is NaN /);
  });

  it("nan on a relu model: a first-stage NaN passes relu (it keeps NaN, as PyTorch's) into the loss on the next stage: mlp, 2 stages × 2 replicas", async () => {
    const r = await timed("run", samplePath("mlp"), "--devices", "4", "--set", "parallel.stages=2", "--steps", "3", "--inject-fault", "nan@0:2");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(/^\S+mlp\.fsm: error: step 2: device 2, micro-batch 0: the loss is NaN /);
  });

  it("oom: device 2's memory below its arena is refused before training, naming the arena, the memory and the prediction", async () => {
    const r = await timed("run", plan, "--steps", "2", "--json", "--inject-fault", "oom@2");
    expect(r.code, r.stderr).toBe(1);
    const m = /^\S+: error: device 2 is out of memory: its arena needs (\d+) bytes \([\d.]+ MiB\) but the device has (\d+) bytes \([\d.]+ MiB\) \(--inject-fault oom: its limit set below its arena\); the plan predicted a peak of (\d+) bytes \([\d.]+ MiB\) for it\. Use more micro-batches .*a sharding strategy .* or more devices$/.exec(oneError(r.stderr));
    expect(m, r.stderr).not.toBeNull();
    const [arena, limit, predicted] = [m![1], m![2], m![3]].map(Number) as [number, number, number];
    expect(limit).toBeLessThan(arena);
    const p = JSON.parse(readFileSync(plan, "utf8")) as Plan;
    expect(predicted).toBe(p.predicted.peakMemoryBytes[2]);
    expect(stepsReported(r.stdout)).toEqual([]);
  });

  for (const kind of ["kernel", "nan"]) {
    it(`${kind} at step 3 with --save-every 1: the checkpoint stays at step 2, complete; nothing of step 3 is written`, async () => {
      const dir = join(root, `ckpt-${kind}`);
      const r = await timed("run", plan, "--steps", "5", "--json", "--save", dir, "--save-every", "1", "--inject-fault", `${kind}@0:3`);
      expect(r.code, r.stderr).toBe(1);
      expect(oneError(r.stderr)).toMatch(/: error: step 3: device \d, /);
      expect(stepsReported(r.stdout)).toEqual([1, 2]);
      const manifest = JSON.parse(readFileSync(join(dir, "latest.json"), "utf8")) as { step: number; dir: string };
      expect(manifest).toMatchObject({ step: 2, dir: "step-000002" });
      // No step-000003 and no temporary directory of it.
      expect(readdirSync(dir).sort()).toEqual(["latest.json", "step-000001", "step-000002"]);
      expect(readdirSync(join(dir, "step-000002")).sort()).toEqual([0, 1, 2, 3].map((d) => `rank-0000${d}.safetensors`));
      // Complete: resuming from it gives the uninterrupted run's step 3 bit for bit.
      const whole = await run("run", plan, "--steps", "3", "--json");
      const resumed = await run("run", plan, "--steps", "1", "--json", "--resume", dir);
      expect(resumed.code, resumed.stderr).toBe(0);
      const loss = (out: string, step: number) => (out.trim().split("\n").map((l) => JSON.parse(l) as { step?: number; loss?: number }).find((l) => l.step === step)!).loss;
      expect(loss(resumed.stdout, 3)).toBe(loss(whole.stdout, 3)); // steps count on from the checkpoint's
    });
  }

  it("a real process: bin/fsm.js exits with code 1 and the one error, promptly", () => {
    const bin = resolve(import.meta.dirname, "../../bin/fsm.js");
    expect(existsSync(resolve(import.meta.dirname, "../../dist/cli/main.js")), "run `npm run build` first").toBe(true);
    const t0 = performance.now();
    const child = spawnSync(process.execPath, [bin, "run", plan, "--steps", "3", "--inject-fault", "comm@0:2"], { encoding: "utf8", timeout: 50_000 });
    expect(child.signal, child.stderr).toBeNull(); // not killed by the timeout: nothing hung
    expect(child.status, child.stderr).toBe(1);
    expect(oneError(child.stderr)).toMatch(/: error: step 2: device 0, action 0\w+(@\d+)?: communication comm\.\w+ failed: injected fault$/);
    expect(performance.now() - t0).toBeLessThan(PROMPT_MS);
  });
});

describe("fsm run --inject-fault: what it refuses", () => {
  const cases: [string, string[], RegExp][] = [
    ["an unknown kind", ["--inject-fault", "disk@1"], /^fsm run: --inject-fault: unknown fault kind 'disk' in 'disk@1' \(expected kernel, comm, nan, oom, hang\)$/m],
    ["a spec without a device", ["--inject-fault", "kernel"], /^fsm run: --inject-fault must be KIND@DEVICE\[:STEP\] with KIND one of kernel, comm, nan, oom, hang \(e\.g\. kernel@1:3\), got 'kernel'$/m],
    ["step 0", ["--inject-fault", "kernel@1:0"], /--inject-fault must be KIND@DEVICE\[:STEP\]/],
    ["a device the plan does not have", ["--inject-fault", "kernel@4"], /^fsm run: --inject-fault kernel@4: the plan has no device 4 \(it has devices 0\.\.3\)$/m],
    ["a step after the run's last", ["--steps", "2", "--inject-fault", "nan@1:3"], /^fsm run: --inject-fault nan@1:3: the run has only 2 steps$/m],
    ["a step for oom", ["--inject-fault", "oom@1:2"], /oom strikes when the devices' arenas are allocated, before any step; give no step \('oom@1'\)/],
    ["another engine", ["--engine", "reference", "--inject-fault", "kernel@0"], /--inject-fault works with the native engine only, not --engine reference/],
    ["a timeout that is not a positive number", ["--timeout", "-3"], /--timeout must be a number of seconds in \(0, 1000000\], got '-3'/],
  ];
  for (const [name, argv, message] of cases) {
    it(`${name}: usage error, exit 2`, async () => {
      const r = await run("run", plan, ...argv);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe(""); // refused before anything runs
    });
  }

  it("hang: device 1 stops responding at step 2; its peers' timeout names it (no run hangs), exit 1", async () => {
    const r = await timed("run", plan, "--steps", "3", "--json", "--timeout", "2", "--inject-fault", "hang@1:2");
    expect(r.code, r.stderr).toBe(1);
    // The timeout names whoever never came (perhaps itself waiting on device 1), and the device that was busy
    // computing all along: device 1, in the action where it stopped.
    expect(oneError(r.stderr)).toMatch(/: error: step 2: device [023], action \S+: communication comm\.\w+ failed: .*timed out after 2 s .*never \w+; busy computing, not waiting: device 1, action \S+ \(\w+\) for \d+\.\d s$/);
    expect(stepsReported(r.stdout)).toEqual([1]);
    expect(r.ms).toBeLessThan(PROMPT_MS);
  });

  it("hang on a device nothing waits for (1 device): it gives up after three timeouts itself, exit 1", async () => {
    const r = await timed("run", tiny, "--steps", "2", "--timeout", "0.5", "--inject-fault", "hang@0");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(/: error: step 1: device 0, action \S+: kernel \S+ failed: injected hang: stopped responding for 1\.5 s and nothing waited on it$/);
    expect(r.ms).toBeLessThan(PROMPT_MS);
  });

  it("a comm fault on a device that communicates nothing (1 device): a clear error at startup, exit 1", async () => {
    const r = await run("run", tiny, "--steps", "2", "--inject-fault", "comm@0");
    expect(r.code, r.stderr).toBe(1);
    expect(oneError(r.stderr)).toMatch(/error: --inject-fault comm@0: device 0 has no communication/);
    expect(r.stdout).not.toMatch(/^step /m);
  });
});

describe("each device's arena must fit the device's memory", () => {
  it("a plan whose device memory is smaller than a device's arena is refused before training (fsm run)", async () => {
    // The same plan for a machine with 200 kB per device: below every device's arena (0.3-0.4 MB).
    const p = JSON.parse(readFileSync(plan, "utf8")) as { cluster: { memoryBytes: number } };
    p.cluster.memoryBytes = 200_000;
    const small = join(root, "tiny4-small-memory.json");
    writeFileSync(small, planToJson(p as unknown as Plan)); // sealed again: the plan's hash covers the cluster
    const r = await run("run", small, "--steps", "2", "--json");
    expect(r.code, r.stderr).toBe(1);
    const line = oneError(r.stderr);
    expect(line).toMatch(/: error: device 0 is out of memory: its arena needs \d+ bytes \([\d.]+ MiB\) but the device has 200000 bytes \(0\.19 MiB\); the plan predicted a peak of \d+ bytes/);
    expect(line).not.toContain("inject");
    expect(stepsReported(r.stdout)).toEqual([]);
  });

  it("the native engine refuses it as an EngineError; with the device's real memory it builds", () => {
    const model = checkFile(tiny, { overrides: sets(SHAPE) }).model!;
    const p = compileModel(model, { cluster: "cpu", devices: 4, source: tiny, fsmVersion: "test" }).plan;
    const graph = graphFromJson(p.model.name, p.graph);
    const engine = createEngine("native", p, graph, 1);
    const arenas = engine.deviceMemoryBytes!;
    // One byte less than the largest arena: the devices holding it are refused, the first of them named.
    const memoryBytes = Math.max(...arenas) - 1;
    const first = arenas.findIndex((a) => a > memoryBytes);
    const tight = { ...p, cluster: { ...p.cluster, memoryBytes } };
    expect(() => createEngine("native", tight, graph, 1)).toThrow(EngineError);
    expect(() => createEngine("native", tight, graph, 1)).toThrow(
      new RegExp(`^device ${first} is out of memory: its arena needs ${arenas[first]} bytes \\([\\d.]+ MiB\\) but the device has ${memoryBytes} bytes`),
    );
    expect(createEngine("native", { ...p, cluster: { ...p.cluster, memoryBytes: Math.max(...arenas) } }, graph, 1).deviceMemoryBytes).toEqual(arenas);
    expect(() => createEngine("reference", p, graph, 1, { fault: { kind: "kernel", device: 0, step: 1 } })).toThrow(/--inject-fault works with the native engine only \(not reference\)/);
  });
});
