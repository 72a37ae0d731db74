// A failure reaches the caller as data: RunError.failure carries the kind, step, device, plan action and op
// (a timeout also the ranks that never came and the device busy all along; an out-of-memory refusal the
// arena and the device's memory) — read from the native executor's structured failure, never parsed from its
// message. Expected values come from the lowered program itself (the instruction the fault targets).
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { lower } from "../../src/lower/lower.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { InjectedFault } from "../../src/runtime/engine-types.js";
import { faultTarget } from "../../src/runtime/fault-target.js";
import { RunError, runPlan } from "../../src/runtime/run-loop.js";
import { runCli as run } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";

// 2 pipeline stages × 2 FSDP replicas: stage 0 on devices 0 and 1, stage 1 (the losses) on devices 2 and 3.
const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2 }) }).model!;
const plan = compileModel(model, { cluster: "cpu", devices: 4, source: "gpt-tiny", fsmVersion: "test" }).plan;
const program = lower(plan, graphFromJson(plan.model.name, plan.graph));

async function failureOf(fault: InjectedFault, timeoutSeconds?: number): Promise<NonNullable<RunError["failure"]>> {
  try {
    await runPlan(plan, { steps: 3, engine: "native", injectFault: fault, ...(timeoutSeconds !== undefined && { timeoutSeconds }) });
  } catch (e) {
    expect(e).toBeInstanceOf(RunError);
    const failure = (e as RunError).failure;
    expect(failure, (e as Error).message).toBeDefined();
    return failure!;
  }
  return expect.fail("the run did not fail");
}

/** The plan action and op of the instruction an injected fault strikes. */
function target(fault: InjectedFault): { action: string; op: string } {
  const ins = program.devices[fault.device]!.instructions[faultTarget(program, fault).instruction]!;
  return { action: ins.action, op: ins.op };
}

describe("a failure's fields", () => {
  it("kernel: the step, device, action and op of the kernel that threw", async () => {
    const fault = { kind: "kernel", device: 1, step: 2 } as const;
    const f = await failureOf(fault);
    expect(f).toMatchObject({ kind: "kernel", step: 2, device: 1, ...target(fault), message: "injected fault" });
    expect(f.op!.startsWith("comm.")).toBe(false);
  });

  it("comm: the collective or send/recv that threw, on the communication stream", async () => {
    const fault = { kind: "comm", device: 2, step: 1 } as const;
    const f = await failureOf(fault);
    expect(f).toMatchObject({ kind: "comm", step: 1, device: 2, ...target(fault), message: "injected fault" });
    expect(f.op!.startsWith("comm.")).toBe(true);
  });

  it("hang: a peer's timeout names the ranks that never came and the device busy computing all along", async () => {
    const fault = { kind: "hang", device: 1, step: 1 } as const;
    const f = await failureOf(fault, 1);
    expect(f.kind).toBe("timeout");
    expect(f.step).toBe(1);
    expect(f.device).not.toBe(1);
    expect(f.op!.startsWith("comm.")).toBe(true);
    expect(f.peers!.length).toBeGreaterThan(0);
    expect(f.busy).toEqual([expect.objectContaining({ device: 1, ...target(fault) })]);
    expect(f.busy![0]!.seconds).toBeGreaterThanOrEqual(0.9);
  }, 20_000);

  it("nan: the device and micro-batch whose loss was not finite", async () => {
    const f = await failureOf({ kind: "nan", device: 3, step: 2 });
    expect(f).toMatchObject({ kind: "nan", step: 2, device: 3, microBatch: 0 });
  });

  it("oom: before any step, the device, its arena and its memory", async () => {
    const f = await failureOf({ kind: "oom", device: 2, step: 1 });
    const arena = program.devices[2]!.arenaBytes;
    expect(f).toEqual(expect.objectContaining({ kind: "oom", device: 2, arenaBytes: arena, limitBytes: Math.floor(arena / 2) }));
    expect(f.step).toBeUndefined();
  });

  it("fsm run --json writes the failure as one JSON line besides the error on stderr", async () => {
    const r = await run("run", samplePath("gpt-tiny"), "--devices", "4", ...sets({ stages: 2, data_parallel: 2, shard: "fsdp", chunks: 2 }).flatMap((s) => ["--set", s]), "--steps", "3", "--json", "--inject-fault", "kernel@1:2");
    expect(r.code).toBe(1);
    const line = r.stdout.trim().split("\n").find((l) => l.startsWith('{"error"'));
    expect(line, r.stdout).toBeDefined();
    const { error } = JSON.parse(line!) as { error: Record<string, unknown> };
    expect(error).toMatchObject({ kind: "kernel", step: 2, device: 1, ...target({ kind: "kernel", device: 1, step: 2 }), message: "injected fault" });
    expect(r.stderr).toContain(String(error.text));
  });
});
