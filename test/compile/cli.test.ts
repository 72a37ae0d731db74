// `fsm compile` and `fsm schedule` as a user runs them, in-process: summaries, the written plan, --json,
// per-rank listings, and exit codes for model errors (1), broken plans (1) and usage mistakes (2).
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadPlan } from "../../src/verify/load.js";
import { runCli as run } from "../support/cli.js";
import { samplePath } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-compile-cli-"));
const tiny = ["--set", "parallel.stages=2", "--set", "parallel.chunks=2", "--set", "parallel.shard=fsdp", "--set", "parallel.checkpoint=never"];

describe("fsm compile", () => {
  it("writes the plan and prints stages, devices, shard groups, schedule and predictions", async () => {
    const out = join(dir, "tiny.plan.json");
    const r = await run("compile", samplePath("gpt-tiny"), "--devices", "4", "-o", out, ...tiny);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("model gpt_tiny on cpu: 4 devices (2 nodes) = 2 pipeline stages × 2 data-parallel");
    expect(r.stdout).toContain("schedule 1f1b, 2 micro-batches of 2 per replica (batch 8), checkpoint never");
    expect(r.stdout).toContain("shard fsdp (reshard after forward: true): each stage over its 2 replicas");
    expect(r.stdout).toMatch(/0\s+wte \.\. \S+ \(0-\d\)\s+ranks 0-1/);
    expect(r.stdout).toMatch(/1\s+\S+ \.\. lm_head \(\d-5\)\s+ranks 2-3/);
    expect(r.stdout).toMatch(/predicted step [\d.]+ (µs|ms), bubble [\d.]+%, exposed communication/);
    expect(r.stdout).toMatch(/throughput [\d,]+ tokens\/s, MFU [\d.]+%/);
    expect(r.stdout).toContain(`wrote ${out}`);
    expect(loadPlan(out).settings.stages).toBe(2);
  });

  it("--json prints the summary as an object", async () => {
    const out = join(dir, "tiny-json.plan.json");
    const r = await run("compile", samplePath("gpt-tiny"), "--devices", "4", "-o", out, "--json", ...tiny);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as Record<string, unknown> & { predicted: Record<string, unknown>; plan: { path: string } };
    expect([j.devices, j.stages, j.microbatches, j.schedule, j.shard, j.dataParallel]).toEqual([4, 2, 2, "1f1b", "fsdp", 2]);
    for (const k of ["stepTimeSeconds", "bubbleFraction", "exposedCommSeconds"]) expect(typeof j.predicted[k]).toBe("number");
    expect((j.predicted.peakMemoryBytes as number[]).length).toBe(4);
    expect((j.predicted.modelStateBytes as number[]).length).toBe(4);
    expect(j.plan.path).toBe(out);
  });

  it("writes <model>.plan.json in the current directory by default", async () => {
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const r = await run("compile", samplePath("mlp"), "--set", "parallel.stages=2", "--set", "parallel.data_parallel=1");
      expect(r.code).toBe(0);
      expect(loadPlan(join(dir, "mlp.plan.json")).model.name).toBe("mlp");
    } finally {
      process.chdir(cwd);
    }
  });

  it("reports settings it cannot plan and plans that do not fit as errors (exit 1)", async () => {
    const auto = await run("compile", samplePath("mlp"), "-o", join(dir, "x.json"));
    expect(auto.code).toBe(1);
    expect(auto.stderr).toContain("error: the plan search needs the number of devices: give --devices N");
    const big = await run("compile", samplePath("gpt2-124m"), "--devices", "4", "-o", join(dir, "y.json"), "--set", "parallel.stages=2", "--set", "parallel.chunks=2", "--set", "parallel.checkpoint=never");
    expect(big.code).toBe(1);
    expect(big.stderr).toMatch(/needs [\d.]+ GiB \(\d+ bytes\) but each cpu device has 12\.00 GiB/);
    expect(big.stderr).toContain("--set parallel.chunks=16");
    const bad = await run("compile", samplePath("mlp"), "--set", "parallel.shard=fsdpp");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("error[FSM500]");
  });

  it("usage mistakes exit 2", async () => {
    expect((await run("compile")).code).toBe(2);
    expect((await run("compile", samplePath("mlp"), "--devices", "x")).code).toBe(2);
    const cluster = await run("compile", samplePath("mlp"), "--cluster", "tpu");
    expect(cluster.code).toBe(2);
    expect(cluster.stderr).toContain("unknown cluster 'tpu'");
  });
});

describe("fsm schedule", () => {
  const plan = join(dir, "sched.plan.json");

  it("prints every program's streams, one action per line with its waits", async () => {
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "4", "-o", plan, ...tiny)).code).toBe(0);
    const r = await run("schedule", plan);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("program 0: pipeline rank 0, stage 0, ranks 0..1");
    expect(r.stdout).toContain("program 1: pipeline rank 1, stage 1, ranks 2..3");
    expect(r.stdout).toMatch(/#\d+\s+0F0\s+/);
    expect(r.stdout).toMatch(/0SEND_F0@2\s+[\d.]+(ms|s) \.\. [\d.]+(ms|s)\s+after \d+:0F0/);
    expect(r.stdout).toMatch(/0ALL_GATHERu\d/);
    expect(r.stdout).toMatch(/gates layer \d+ on \d+:\dALL_GATHER/);
  });

  it("--rank R shows R's program with pipeline peers resolved for its replica", async () => {
    const r = await run("schedule", plan, "--rank", "1");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("program 0: pipeline rank 0, stage 0, rank 1 (replica 1)");
    expect(r.stdout).toContain("0SEND_F0@3");
    expect(r.stdout).not.toContain("0SEND_F0@2");
    expect((await run("schedule", plan, "--rank", "4")).code).toBe(2);
    expect((await run("schedule", plan, "--rank", "-1")).code).toBe(2);
  });

  it("a corrupt plan is a clear error with its JSON path (exit 1)", async () => {
    const broken = join(dir, "broken.plan.json");
    const json = JSON.parse(readFileSync(plan, "utf8"));
    json.programs[1].actions[2].deps = [12345];
    writeFileSync(broken, JSON.stringify(json));
    const r = await run("schedule", broken);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/broken\.plan\.json: error: invalid plan: programs\[1\]\.actions\[2\]\.deps\[0\]: 12345 is out of range/);
    const missing = await run("schedule", join(dir, "none.json"));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("cannot read");
  });
});

describe("fsm compile with oss", () => {
  it("reports the min-max partition next to FairScale's greedy, and keeps it in the plan", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "fsm-oss-")), "plan.json");
    const r = await run("compile", samplePath("gpt-tiny"), "--set", "parallel.stages=1", "--set", "parallel.data_parallel=4", "--set", "parallel.shard=oss", "--set", "parallel.chunks=2", "-o", out);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/oss partition \(largest shard per stage; FairScale's greedy in brackets\): \S+ \S+ \[\S+ \S+\]/);
    const plan = JSON.parse(readFileSync(out, "utf8")) as { shard: { partition?: { largestShardBytes: number; greedyLargestShardBytes: number } }[] };
    const part = plan.shard[0]!.partition!;
    expect(part.largestShardBytes).toBeGreaterThan(0);
    expect(part.largestShardBytes).toBeLessThanOrEqual(part.greedyLargestShardBytes);
  });
});
