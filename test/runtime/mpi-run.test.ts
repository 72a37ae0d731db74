// `fsm run` under Open MPI, with real processes: `mpirun -np P node bin/fsm.js run PLAN`. Parity: every
// process count gives the in-process run's losses and checkpoint files bit for bit (the mpi communicator
// keeps the in-process reduction order), over shared memory and over TCP. Failures: a throwing, hanging or
// killed process stops the run with one error and a non-zero exit, no hang. Checkpoints: written by every
// process, resumed into another process count. SIGTERM: stop at a step boundary, save, exit 143.
import { spawn, spawnSync, type SpawnSyncReturns } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nativeBuildInfo } from "../../src/native/binding.js";
import type { Plan } from "../../src/plan/plan.js";
import { planToJson } from "../../src/plan/serialize.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { compileSample, type SampleName } from "../compile/helpers.js";

const bin = resolve(import.meta.dirname, "../../bin/fsm.js");
const hasMpirun = spawnSync("mpirun", ["--version"], { encoding: "utf8" }).status === 0;
const built = nativeBuildInfo().mpi !== null;
// CI installs Open MPI and builds with it: there these tests must run, not skip.
if (process.env.CI && !(hasMpirun && built)) throw new Error(`CI: Open MPI is required (mpirun ${hasMpirun ? "found" : "missing"}, addon ${built ? "built with MPI" : "built without MPI"})`);
const mpi = hasMpirun && built;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "fsm-mpi-"));
  expect(existsSync(resolve(import.meta.dirname, "../../dist/cli/main.js")), "run `npm run build` first").toBe(true);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** mpirun -np P node bin/fsm.js ARGS (oversubscribed: 2 cores here), optionally over TCP only. */
function mpirun(np: number, args: readonly string[], options: { tcp?: boolean; timeoutMs?: number } = {}): SpawnSyncReturns<string> {
  const mca = options.tcp ? ["--mca", "btl", "self,tcp"] : [];
  return spawnSync("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", String(np), ...mca, process.execPath, bin, ...args], { encoding: "utf8", timeout: options.timeoutMs ?? 120_000 });
}

function planFile(name: string, sample: SampleName, overrides: Record<string, string | number>): { path: string; plan: Plan } {
  const plan = compileSample(sample, "cpu", { "train.steps": 3, ...overrides }, 4).plan;
  const path = join(dir, `${name}.plan.json`);
  writeFileSync(path, planToJson(plan));
  return { path, plan };
}

const stepLosses = (stdout: string): number[] =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { step?: number; loss?: number })
    .filter((l) => l.step !== undefined)
    .map((l) => l.loss!);

/** The stderr lines that are fsm's errors (mpirun adds its own banner). */
const fsmErrors = (stderr: string): string[] => stderr.split("\n").filter((l) => / error: /.test(l));

/** Every file of a checkpoint's step directory, by name → bytes. */
function checkpointFiles(ckpt: string): Map<string, Buffer> {
  const m = JSON.parse(readFileSync(join(ckpt, "latest.json"), "utf8")) as { dir: string };
  return new Map(readdirSync(join(ckpt, m.dir)).map((f) => [f, readFileSync(join(ckpt, m.dir, f))]));
}

const adam = { "train.optimizer": "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)" };
const CASES: [string, SampleName, Record<string, string | number>][] = [
  ["mlp-pipeline-ddp", "mlp", { stages: 2, data_parallel: 2, chunks: 2, shard: "none", checkpoint: "never" }],
  ["mlp-oss", "mlp", { stages: 1, data_parallel: 4, chunks: 2, shard: "oss", checkpoint: "never" }],
  ["mlp-sddp", "mlp", { stages: 1, data_parallel: 4, chunks: 2, shard: "sddp", checkpoint: "never" }],
  ["gpt-fsdp-pipeline", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "except_last" }],
  ["gpt-interleaved", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 4, shard: "none", checkpoint: "always", schedule: "interleaved", virtual_stages: 2 }],
  ["gpt-bf16-fsdp", "gpt-tiny", { ...adam, stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp", checkpoint: "never", "train.precision": "bf16" }],
  ["gpt-fp16-oss", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "oss", checkpoint: "never", "train.precision": "fp16" }],
];

describe.skipIf(!mpi)("mpirun: the same bits as one process", () => {
  for (const [name, sample, overrides] of CASES) {
    it(`${name}: -np 2 and -np 4 give the in-process run's losses and checkpoint files exactly`, async () => {
      const { path, plan } = planFile(name, sample, overrides);
      const one = join(dir, `${name}-one`);
      const losses: number[] = [];
      await runPlan(plan, { save: { dir: one }, onStep: (r) => losses.push(r.loss) });
      const want = checkpointFiles(one);
      expect(want.size).toBe(4);
      for (const np of [2, 4]) {
        const ckpt = join(dir, `${name}-np${np}`);
        const r = mpirun(np, ["run", path, "--json", "--save", ckpt]);
        expect(r.status, r.stderr).toBe(0);
        expect(stepLosses(r.stdout), `-np ${np}`).toEqual(losses); // rank 0 alone prints: one line per step
        const got = checkpointFiles(ckpt);
        for (const [file, bytes] of want) expect(got.get(file)?.equals(bytes), `-np ${np}: ${file}`).toBe(true);
      }
    });
  }

  it("a .fsm file: every process compiles it (deterministically: the plans' hashes agree) and trains as one", () => {
    const model = resolve(import.meta.dirname, "../../samples/mlp.fsm");
    const args = ["run", model, "--devices", "4", "--set", "parallel.stages=2", "--steps", "3", "--json"];
    const alone = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8" });
    expect(alone.status, alone.stderr).toBe(0);
    const r = mpirun(2, args);
    expect(r.status, r.stderr).toBe(0);
    expect(stepLosses(r.stdout)).toEqual(stepLosses(alone.stdout));
  });

  it("tensor and sequence parallelism across processes (-np 4: each rank of a group its own process): the same losses", async () => {
    const { path, plan } = planFile("tp", "gpt-tiny", { ...adam, stages: 1, data_parallel: 2, tensor_parallel: 2, sequence_parallel: "true", chunks: 2, shard: "fsdp", checkpoint: "never" });
    expect(plan.settings.tensorParallel).toBe(2);
    const losses: number[] = [];
    await runPlan(plan, { onStep: (r) => losses.push(r.loss) });
    const r = mpirun(4, ["run", path, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(stepLosses(r.stdout)).toEqual(losses);
  });

  it("hybrid sharding with no_sync across processes (-np 4: two shard groups of 2): the same losses", async () => {
    const { path, plan } = planFile("hsdp", "gpt-tiny", { ...adam, stages: 1, data_parallel: 4, shard: "fsdp", shard_group: 2, no_sync: "true", chunks: 2, schedule: "1f1b", checkpoint: "never", fsdp_min_params: 5000 });
    expect([plan.settings.shardGroup, plan.settings.noSync]).toEqual([2, true]);
    const losses: number[] = [];
    await runPlan(plan, { onStep: (r) => losses.push(r.loss) });
    const r = mpirun(4, ["run", path, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(stepLosses(r.stdout)).toEqual(losses);
  });

  it("over TCP only (--mca btl self,tcp, the path between machines): the same losses", async () => {
    const { path, plan } = planFile("tcp", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" });
    const losses: number[] = [];
    await runPlan(plan, { onStep: (r) => losses.push(r.loss) });
    const r = mpirun(4, ["run", path, "--json"], { tcp: true });
    expect(r.status, r.stderr).toBe(0);
    expect(stepLosses(r.stdout)).toEqual(losses);
  });

  it("token data: each process reads only its own rows (the bytes it read, counted), and the losses do not change", async () => {
    // gpt-tiny: batch 8, seq 16, so a row is a window of 17 u16 tokens (34 bytes); 4 replicas, 2 rows each.
    const tokens = join(dir, "train.bin");
    writeFileSync(tokens, Buffer.from(Uint16Array.from({ length: 4000 }, (_, i) => (i * 7 + (i >> 3)) % 64).buffer));
    const { path, plan } = planFile("tokens", "gpt-tiny", { ...adam, stages: 1, data_parallel: 4, chunks: 1, shard: "fsdp", checkpoint: "never", "train.data": `tokens("${tokens}", dtype: u16)` });
    const losses: number[] = [];
    await runPlan(plan, { onStep: (r) => losses.push(r.loss) });
    const r = mpirun(4, ["run", path, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(stepLosses(r.stdout)).toEqual(losses);
    const summary = (r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { summary?: { processes: { dataBytesRead: number }[] } }).find((l) => l.summary)!).summary!;
    // Opening reads the first batch whole (its checks); then each of the 3 steps reads its 2 rows.
    expect(summary.processes.map((p) => p.dataBytesRead)).toEqual([0, 1, 2, 3].map(() => (8 + 3 * 2) * 17 * 2));
  });

  it("the --json summary has every process's devices, arenas and step time; --trace holds every device", () => {
    const { path, plan } = planFile("summary", "mlp", { stages: 2, data_parallel: 2, chunks: 2, shard: "none", checkpoint: "never" });
    const trace = join(dir, "trace.json");
    const r = mpirun(2, ["run", path, "--json", "--trace", trace]);
    expect(r.status, r.stderr).toBe(0);
    const summary = (r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { summary?: { processes: { process: number; ranks: number[]; arenaBytes: number[]; measuredStepSeconds: number }[]; peakMemoryBytes: number[] } }).find((l) => l.summary)!).summary!;
    expect(summary.processes.map((p) => [p.process, p.ranks])).toEqual([
      [0, [0, 1]],
      [1, [2, 3]],
    ]);
    for (const p of summary.processes) expect(p.measuredStepSeconds).toBeGreaterThan(0);
    expect(summary.peakMemoryBytes).toEqual(summary.processes.flatMap((p) => p.arenaBytes));
    expect(summary.peakMemoryBytes).toHaveLength(plan.cluster.devices);
    const events = (JSON.parse(readFileSync(trace, "utf8")) as { traceEvents: { ph: string; pid: number; ts?: number }[] }).traceEvents;
    expect([...new Set(events.filter((e) => e.ph === "X").map((e) => e.pid))].sort()).toEqual([0, 1, 2, 3]);
    expect(Math.min(...events.filter((e) => e.ts !== undefined).map((e) => e.ts!))).toBeGreaterThanOrEqual(0);
  });
});

describe.skipIf(!mpi)("mpirun: bad settings and failing processes", () => {
  let plan: string;
  beforeAll(() => {
    plan = planFile("fail", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never", "train.steps": 4 }).path;
  });

  it("-np that does not divide the devices: one clear error before any work, non-zero exit", () => {
    const r = mpirun(3, ["run", plan, "--json"]);
    expect(r.status).not.toBe(0);
    expect(fsmErrors(r.stderr)).toEqual([`${plan}: error: the plan has 4 devices, which 3 processes cannot share evenly: run it with a process count that divides 4 (mpirun -np 1|2|4)`]);
    expect(r.stdout).toBe("");
  });

  it("an error before the work on one process only (its plan file unreadable there): told by that process", () => {
    const bad = join(dir, "bad.plan.json");
    writeFileSync(bad, '{"format": 1}');
    // Process 1 is given a broken plan, process 0 the good one (as a file missing or stale on one host).
    const r = spawnSync("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", "2", "sh", "-c", `exec "${process.execPath}" "${bin}" run "$([ "$OMPI_COMM_WORLD_RANK" = 1 ] && echo ${bad} || echo ${plan})" --json`], { encoding: "utf8", timeout: 60_000 });
    expect(r.status).not.toBe(0);
    expect(fsmErrors(r.stderr)).toHaveLength(1);
    expect(fsmErrors(r.stderr)[0]).toMatch(/^\[process 1\] .*bad\.plan\.json: error: invalid plan: /);
  });

  it("a kernel failing in one process: one error, from that process, naming the device and action", () => {
    const t0 = performance.now();
    const r = mpirun(2, ["run", plan, "--inject-fault", "kernel@3:2"]);
    expect(r.status).not.toBe(0);
    expect(fsmErrors(r.stderr)).toHaveLength(1);
    expect(fsmErrors(r.stderr)[0]).toMatch(/^\[process 1\] .*: error: step 2: device 3, action \w+(@\d+)?: kernel \w+ failed: injected fault$/);
    expect(performance.now() - t0).toBeLessThan(60_000);
  });

  it("a hanging device: its peers time out within --timeout, naming who never came; mpirun exits non-zero", () => {
    const t0 = performance.now();
    const r = mpirun(2, ["run", plan, "--inject-fault", "hang@2:2", "--timeout", "3"]);
    expect(r.signal, "mpirun itself hung").toBeNull();
    expect(r.status).not.toBe(0);
    const errors = fsmErrors(r.stderr);
    expect(errors.length).toBeGreaterThanOrEqual(1);
    expect(errors.join("\n")).toMatch(/timed out after 3 s .*rank\(s\) \[[\d, ]*\] never arrived/);
    expect(performance.now() - t0).toBeLessThan(60_000);
  });

  it("a process killed with SIGKILL mid-run: the others stop, mpirun exits non-zero, nothing hangs", async () => {
    const slow = planFile("kill", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never", "train.steps": 100000 }).path;
    const child = spawn("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", "2", process.execPath, bin, "run", slow, "--json", "--timeout", "5"], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
    // Once a few steps are done, kill -9 one training process (a child of mpirun running bin/fsm.js).
    while (stepLosses(out || "{}\n").length < 3) await new Promise((r) => setTimeout(r, 100));
    const pids = spawnSync("pgrep", ["-P", String(child.pid), "-f", "fsm.js"], { encoding: "utf8" }).stdout.trim().split("\n").map(Number);
    expect(pids.length).toBe(2);
    process.kill(pids[1]!, "SIGKILL");
    const t0 = performance.now();
    const code = await Promise.race([exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 40_000))]);
    if (code === "hung") child.kill("SIGKILL");
    expect(code).not.toBe("hung");
    expect(code).not.toBe(0);
    expect(performance.now() - t0).toBeLessThan(40_000);
  });
});

describe.skipIf(!mpi)("mpirun: checkpoints", () => {
  it("saved by 2 processes, resumed by 4 and by 1: the uninterrupted run's losses", async () => {
    const { path, plan } = planFile("resume", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" });
    const whole: number[] = [];
    await runPlan(plan, { steps: 5, onStep: (r) => whole.push(r.loss) });
    const ckpt = join(dir, "resume-ckpt");
    const saved = mpirun(2, ["run", path, "--steps", "3", "--json", "--save", ckpt]);
    expect(saved.status, saved.stderr).toBe(0);
    expect(readdirSync(ckpt).sort()).toEqual(["latest.json", "step-000003"]); // no temporary directory left
    const four = mpirun(4, ["run", path, "--steps", "2", "--json", "--resume", ckpt]);
    expect(four.status, four.stderr).toBe(0);
    expect(stepLosses(four.stdout)).toEqual(whole.slice(3));
    const alone: number[] = [];
    await runPlan(plan, { steps: 2, resume: ckpt, onStep: (r) => alone.push(r.loss) });
    expect(alone).toEqual(whole.slice(3));
  });

  it("resumed into another plan (resharded) under -np 2: what one process resuming it computes", async () => {
    const from = planFile("reshard-from", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" });
    const to = planFile("reshard-to", "gpt-tiny", { ...adam, stages: 1, data_parallel: 4, chunks: 2, shard: "oss", checkpoint: "never" });
    const ckpt = join(dir, "reshard-ckpt");
    await runPlan(from.plan, { steps: 3, save: { dir: ckpt } });
    const alone: number[] = [];
    await runPlan(to.plan, { steps: 2, resume: ckpt, onStep: (r) => alone.push(r.loss) });
    const r = mpirun(2, ["run", to.path, "--steps", "2", "--json", "--resume", ckpt]);
    expect(r.status, r.stderr).toBe(0);
    expect(stepLosses(r.stdout)).toEqual(alone);
  });
});

/** Starts `command`, waits for `steps` step lines on stdout, sends SIGTERM to `target(child)`, and returns the
 *  exit code, stdout and stderr. */
async function terminateAfter(command: string, args: readonly string[], steps: number, target: (pid: number) => number[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  while (stepLosses(stdout || "{}\n").length < steps) await new Promise((r) => setTimeout(r, 50));
  for (const pid of target(child.pid!)) process.kill(pid, "SIGTERM");
  const code = await Promise.race([exited, new Promise<null>((r) => setTimeout(() => r(null), 60_000))]);
  if (code === null) child.kill("SIGKILL");
  return { code, stdout, stderr };
}

describe("SIGTERM (what Slurm and Kubernetes send): stop at a step boundary, save, exit 143", () => {
  it("one process", async () => {
    const { path } = planFile("term", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never", "train.steps": 100000 });
    const ckpt = join(dir, "term-ckpt");
    const r = await terminateAfter(process.execPath, [bin, "run", path, "--json", "--save", ckpt], 2, (pid) => [pid]);
    expect(r.code, r.stderr).toBe(143);
    expect(r.stderr).toMatch(/interrupted by SIGTERM after step \d+ of 100000; checkpoint in /);
    const done = stepLosses(r.stdout).length;
    expect((JSON.parse(readFileSync(join(ckpt, "latest.json"), "utf8")) as { step: number }).step).toBe(done);
  });

  it.skipIf(!mpi)("under mpirun, SIGTERM to one process: every process stops at the same step and the checkpoint is whole", async () => {
    const { path } = planFile("term-mpi", "gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never", "train.steps": 100000 });
    const ckpt = join(dir, "term-mpi-ckpt");
    const children = (pid: number): number[] => spawnSync("pgrep", ["-P", String(pid), "-f", "fsm.js"], { encoding: "utf8" }).stdout.trim().split("\n").map(Number);
    const r = await terminateAfter("mpirun", ["--allow-run-as-root", "--oversubscribe", "-np", "2", process.execPath, bin, "run", path, "--json", "--save", ckpt], 2, (pid) => children(pid).slice(1));
    expect(r.code).toBe(143);
    const done = stepLosses(r.stdout).length;
    const manifest = JSON.parse(readFileSync(join(ckpt, "latest.json"), "utf8")) as { step: number; dir: string };
    expect(manifest.step).toBe(done);
    expect(readdirSync(join(ckpt, manifest.dir)).sort()).toEqual([0, 1, 2, 3].map((d) => `rank-0000${d}.safetensors`));
  });
});
