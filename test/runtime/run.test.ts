// `fsm run` as a user runs it: from a .fsm file or a compiled plan, JSON lines per step, the loss falls, runs
// are deterministic, and what cannot run yet says so.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { typicalStep } from "../../src/runtime/run-loop.js";
import { runCli as run } from "../support/cli.js";
import { samplePath } from "../compile/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-run-"));

function losses(stdout: string): number[] {
  return stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { step?: number; loss?: number })
    .filter((x) => x.step !== undefined)
    .map((x) => x.loss!);
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("fsm run", () => {
  it("measures the step as the median of the run's second half: warm-up steps left out", () => {
    // By hand: 8 steps, the second half [5, 4, 2, 2] → (2 + 4) / 2; one step is its own time; two, the second.
    expect(typicalStep([9, 8, 7, 6, 5, 4, 2, 2])).toBe(3);
    expect(typicalStep([7])).toBe(7);
    expect(typicalStep([7, 3])).toBe(3);
  });

  it("the native kernels train like the reference kernels (gpt-tiny on 2 devices, f32)", async () => {
    const plan = join(dir, "tiny-engines.json");
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "2", "-o", plan)).code).toBe(0);
    const ref = losses((await run("run", plan, "--steps", "4", "--json", "--engine", "reference")).stdout);
    const nat = await run("run", plan, "--steps", "4", "--json", "--engine", "native-kernels");
    expect(nat.code, nat.stderr).toBe(0);
    const got = losses(nat.stdout);
    ref.forEach((l, i) => expect(Math.abs(got[i]! - l) / l).toBeLessThan(1e-4));
  });

  it("trains mlp from its .fsm on 4 virtual devices: the loss falls", async () => {
    // The mlp's regression plateaus for ~120 steps before it falls (as in the reference interpreter's test).
    const r = await run("run", samplePath("mlp"), "--devices", "4", "--steps", "240", "--json", "--engine", "reference");
    expect(r.code).toBe(0);
    const l = losses(r.stdout);
    expect(l).toHaveLength(240);
    expect(mean(l.slice(-10))).toBeLessThan(0.7 * mean(l.slice(0, 10)));
    const summary = (JSON.parse(r.stdout.trim().split("\n").pop()!) as { summary: { engine: string; steps: number } }).summary;
    expect(summary).toMatchObject({ engine: "reference", steps: 240 });
  });

  it("runs a compiled plan; the same plan and seed give bit-identical losses", async () => {
    const plan = join(dir, "tiny.json");
    const c = await run("compile", samplePath("gpt-tiny"), "--devices", "2", "-o", plan);
    expect(c.code).toBe(0);
    const a = await run("run", plan, "--steps", "3", "--json", "--engine", "native");
    const b = await run("run", plan, "--steps", "3", "--json", "--engine", "native");
    expect(a.code).toBe(0);
    expect(losses(a.stdout)).toEqual(losses(b.stdout));
    const summary = (JSON.parse(a.stdout.trim().split("\n").pop()!) as { summary: { engine: string; arenaBytes?: number; predictedMemoryBytes: number } }).summary;
    expect(summary.predictedMemoryBytes).toBeGreaterThan(0);
    expect(summary.engine).toBe("native");
    expect(summary.arenaBytes).toBeGreaterThan(0);
    // The measured step time is the median of the second half of the steps (here: after the first).
    const seconds = a.stdout.trim().split("\n").slice(0, 3).map((l) => (JSON.parse(l) as { seconds: number }).seconds);
    expect((summary as unknown as { measuredStepSeconds: number }).measuredStepSeconds).toBeCloseTo((seconds[1]! + seconds[2]!) / 2, 9);
    const text = await run("run", plan, "--steps", "2");
    expect(text.stdout).toMatch(/engine: (native|native-kernels|reference) \(/);
    expect(text.stdout).toMatch(/step 2\/2 {2}loss \d+\.\d{5} {2}\S+ \S+ {2}[\d,]+ tokens\/s {2}ETA/);
    expect(text.stdout).toMatch(/done: 2 steps in .*, loss \d+\.\d+ → \d+\.\d+/);
  });

  it("--trace writes a Chrome trace: a compute and a communication track per device, every action of every step", async () => {
    const trace = join(dir, "trace.json");
    const r = await run("run", samplePath("gpt-tiny"), "--devices", "4", "--steps", "2", "--engine", "native", "--trace", trace);
    expect(r.code, r.stderr).toBe(0);
    const events = (JSON.parse(readFileSync(trace, "utf8")) as { traceEvents: { name: string; ph: string; pid: number; tid: number; ts?: number; dur?: number; args?: { step?: number } }[] }).traceEvents;
    const spans = events.filter((e) => e.ph === "X");
    expect(new Set(spans.map((e) => e.pid))).toEqual(new Set([0, 1, 2, 3]));
    for (const step of [1, 2]) {
      const mine = spans.filter((e) => e.args?.step === step);
      // Each device runs its own stage's forward, backward and optimizer on its compute track.
      expect(mine.filter((e) => /^\dF\d+$/.test(e.name) && e.tid === 0).length).toBeGreaterThanOrEqual(4);
      expect(mine.filter((e) => /^\dB\d+$/.test(e.name) && e.tid === 0).length).toBeGreaterThanOrEqual(4);
      expect(mine.filter((e) => /^\dOPTIMIZER$/.test(e.name))).toHaveLength(4);
      // The communication track has the plan's collectives (the gradient norm at least, on every device).
      expect(new Set(mine.filter((e) => e.tid === 1).map((e) => e.pid))).toEqual(new Set([0, 1, 2, 3]));
      for (const e of mine) expect(e.dur!).toBeGreaterThanOrEqual(0);
    }
    expect(events.some((e) => e.ph === "M" && e.pid === 3)).toBe(true);
    const other = await run("run", samplePath("gpt-tiny"), "--devices", "2", "--steps", "1", "--engine", "reference", "--trace", join(dir, "t2.json"));
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("a trace is recorded by the native engine only");
  });

  it("a plan whose embedding table lost rows is refused at load, naming the op, before any kernel runs", async () => {
    // (A kernel failing on a device mid-run is test/runtime/failures.test.ts's --inject-fault kernel case.)
    const good = join(dir, "fault.json");
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "2", "-o", good)).code).toBe(0);
    const plan = JSON.parse(readFileSync(good, "utf8")) as { graph: { params: { name: string; tensor: number }[]; tensors: { shape: string[] }[] } };
    const wte = plan.graph.params.find((p) => p.name === "wte.weight")!;
    plan.graph.tensors[wte.tensor]!.shape[0] = "8";
    const bad = join(dir, "fault-bad.json");
    writeFileSync(bad, JSON.stringify(plan));
    const r = await run("run", bad, "--steps", "2", "--engine", "native");
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/fault-bad\.json: error: invalid plan: graph\.ops\[0\]: op 0 \(embedding in wte\): parameter 'weight' should have shape \[64, 32\], got wte\.weight f32\[8, 32\]/);
  });

  it("says what it cannot run yet, and refuses bad arguments", async () => {
    const plan = join(dir, "gpt2.json");
    expect((await run("compile", samplePath("gpt2-124m"), "--cluster", "h100-sxm", "--devices", "8", "-o", plan)).code).toBe(0);
    const tokens = await run("run", plan, "--steps", "1");
    expect(tokens.code).toBe(1);
    // The sample names a token file next to it that this checkout does not have: refused before training.
    expect(tokens.stderr).toMatch(/cannot open token file .*samples\/train\.bin/);
    // Mixed precision runs on the native engine only; the fp32 engines say so instead of running fp32.
    const bf16 = await run("run", samplePath("gpt-tiny"), "--set", "train.precision=bf16", "--steps", "1", "--engine", "native-kernels");
    expect(bf16.code).toBe(1);
    expect(bf16.stderr).toContain("engine native-kernels runs fp32 only; precision bf16");
    expect((await run("run", plan, "--steps", "0")).code).toBe(2);
    expect((await run("run", plan, "--engine", "gpu")).code).toBe(2);
    expect((await run("run", plan, "--set", "parallel.stages=2")).code).toBe(2);
    const missing = await run("run", join(dir, "nope.json"));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("invalid plan");
  });
});

describe("fsm run and Ctrl-C", () => {
  it("SIGINT stops a real run at a step boundary: the steps so far reported, a summary, exit 130", async () => {
    const { spawn } = await import("node:child_process");
    const bin = join(import.meta.dirname, "..", "..", "bin", "fsm.js");
    const child = spawn(process.execPath, [bin, "run", samplePath("mlp"), "--steps", "100000", "--json"], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let sent = false;
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => {
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        // After a few steps, interrupt.
        if (!sent && (out.match(/"step":/g) ?? []).length >= 3) {
          sent = true;
          child.kill("SIGINT");
        }
      });
      child.on("exit", (c) => resolve(c));
      setTimeout(() => child.kill("SIGKILL"), 60_000);
    });
    expect(code, err).toBe(130);
    const lines = out.trim().split("\n").map((l) => JSON.parse(l) as { step?: number; summary?: { steps: number; interrupted?: boolean } });
    const steps = lines.filter((l) => l.step !== undefined).map((l) => l.step!);
    const summary = lines.find((l) => l.summary)!.summary!;
    expect(summary.interrupted).toBe(true);
    expect(summary.steps).toBe(steps[steps.length - 1]);
    expect(steps).toEqual(steps.map((_, i) => i + 1));
    expect(steps.length).toBeLessThan(100000);
    expect(err).toContain(`interrupted by Ctrl-C after step ${summary.steps} of 100000`);
  }, 90_000);
});

describe("fsm run failures", () => {
  it("a loss that becomes NaN/Inf stops every device with an error naming the device and micro-batch, exit 1", async () => {
    // A learning rate that makes SGD diverge within a few steps.
    const r = await run("run", samplePath("mlp"), "--devices", "2", "--set", "train.optimizer=sgd(lr: 1e30)", "--steps", "50");
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/step \d+: device \d, micro-batch \d: the loss is (NaN|Infinity|-Infinity)/);
  }, 60_000);
});
