// `fsm compile` and `fsm run` with tensor parallelism, as a user runs them: the mesh said in words, every
// device trained, the loss falling, and checkpoints saved, resumed and consolidated into whole tensors.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readSafetensors } from "../../src/checkpoint/safetensors.js";
import { runCli } from "../support/cli.js";
import { samplePath } from "../compile/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-tp-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("fsm with tensor_parallel", () => {
  const plan = join(dir, "tp.json");

  it("compiles gpt-tiny over 4 devices as 2 replicas × 2 tensor ranks, and runs it", async () => {
    const compiled = await runCli("compile", samplePath("gpt-tiny"), "--devices", "4", "--set", "parallel.tensor_parallel=2", "--set", "parallel.stages=1", "-o", plan);
    expect(compiled.stderr).toBe("");
    expect(compiled.code).toBe(0);
    expect(compiled.stdout).toContain("1 pipeline stage × 2 data-parallel × 2 tensor-parallel");
    const run = await runCli("run", plan, "--steps", "4");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("4 cpu virtual devices = 1 stage × 2 data-parallel × 2 tensor-parallel");
    const losses = [...run.stdout.matchAll(/loss (\d+\.\d+)/g)].map((m) => Number(m[1]));
    expect(losses.length).toBeGreaterThanOrEqual(4);
    expect(losses[3]!).toBeLessThan(losses[0]!);
  });

  it("saves, resumes (the losses of the uninterrupted run) and consolidates whole tensors", async () => {
    const losses = (out: string): string[] => [...out.matchAll(/loss (\d+\.\d+)/g)].map((m) => m[1]!);
    const whole = await runCli("run", plan, "--steps", "4");
    const ck = join(dir, "ck");
    const first = await runCli("run", plan, "--steps", "2", "--save", ck);
    expect(first.stderr).toBe("");
    const second = await runCli("run", plan, "--steps", "2", "--resume", ck);
    expect(second.stderr).toBe("");
    expect([...losses(first.stdout).slice(0, 2), ...losses(second.stdout).slice(0, 2)]).toEqual(losses(whole.stdout).slice(0, 4));
    const out = join(dir, "whole.safetensors");
    const c = await runCli("consolidate", ck, "-o", out);
    expect(c.stderr).toBe("");
    expect(c.code).toBe(0);
    // The embedding is split over the vocabulary (64 / 2 rows a rank): consolidated, it is whole again.
    expect(readSafetensors(out).tensors.get("wte.weight")!.shape).toEqual([64, 32]);
  });

  it("a tensor_parallel that does not divide the devices is an error naming it, and writes no plan", async () => {
    const r = await runCli("compile", samplePath("gpt-tiny"), "--devices", "6", "--set", "parallel.tensor_parallel=4", "-o", join(dir, "bad.json"));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/tensor_parallel/);
    expect(existsSync(join(dir, "bad.json"))).toBe(false);
  });
});
