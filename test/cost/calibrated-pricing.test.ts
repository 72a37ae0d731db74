// Version-3 calibration files (and version 2, read as version 3): the core count, the optimizer, the host's
// overheads and the in-process communicator's collectives round-trip through the file, are validated with located messages, and the
// pricing uses them as hand-computed here (never a timed assertion).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { calibratedOptimizerSeconds, coreShare, hostedStepSeconds, hostStepSeconds, threadedSeconds } from "../../src/cost/calibrated-pricing.js";
import { CalibrationError, loadCalibration, parseCalibration, shapeKey } from "../../src/cost/calibration.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { collectiveTime, groupCollectiveTime, groupLink } from "../../src/cost/collectives.js";
import { estimateOp } from "../../src/cost/graph-cost.js";
import { runCli } from "../support/cli.js";

const root = resolve(import.meta.dirname, "../..");
const FC_KEY = "f32[8,16,32],f32[128,32],f32[128]|bias=true,in=32,out=128";

/** A version-3 file: one linear measured (1 ms forward and 2 ms backward of 3 instructions on one core; 0.6 and
 *  1.2 ms with both cores), 2 cores, 1 µs dispatch, and an all-reduce over 2 ranks of 10 µs + 1 ns/byte. */
function file(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    format: "fsm-calibration",
    version: 3,
    profile: "cpu",
    machine: "test machine",
    date: "2026-12-07",
    cores: 2,
    ops: [{ op: "linear", shape: FC_KEY, forwardSeconds: 1e-3, backwardSeconds: 2e-3, backwardOps: 3, allCores: { forwardSeconds: 0.6e-3, backwardSeconds: 1.2e-3 } }],
    optimizer: { stateBytes: 1000, seconds: 4e-5, allCoresSeconds: 3e-5, ops: 10 },
    host: { instructionSeconds: 1e-6, loopSeconds: 5e-6, handoffSeconds: 2e-6, step: [{ devices: 1, seconds: 10e-6 }, { devices: 4, seconds: 40e-6 }] },
    collectives: [
      { kind: "all_reduce", ranks: 2, latencySeconds: 10e-6, secondsPerByte: 1e-9, samples: [{ bytes: 4096, seconds: 14e-6 }] },
      { kind: "send_recv", ranks: 2, latencySeconds: 3e-6, secondsPerByte: 2e-10, samples: [{ bytes: 4096, seconds: 4e-6 }] },
    ],
    ...over,
  };
}
const parse = (json: unknown) => parseCalibration(json, "c.json");

describe("calibration files, version 3", () => {
  it("round-trip through a file", () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-cal2-"));
    const path = join(dir, "cal.json");
    writeFileSync(path, JSON.stringify(file()));
    const cal = loadCalibration(path);
    expect(cal).toMatchObject({ cores: 2, optimizer: file().optimizer, host: file().host, collectives: file().collectives });
    expect(cal.entries[0]).toEqual((file().ops as unknown[])[0]);
    // What the cost model reads back is what was written.
    expect(parse(JSON.parse(JSON.stringify(file())))).toEqual({ ...cal, origin: "c.json" });
  });

  it("are validated field by field, each message naming the file and the field", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ version: 4 }, "calibration c.json: 'version' must be 1, 2 or 3, got 4"],
      [{ cores: 0 }, "calibration c.json: 'cores' must be an integer of at least 1, got 0"],
      [{ cores: undefined }, "calibration c.json: 'cores' must be an integer of at least 1, got undefined"],
      [{ ops: [{ op: "linear", shape: FC_KEY, forwardSeconds: 1e-3, backwardSeconds: 0, backwardOps: 0 }] }, "calibration c.json: ops[0].allCores must be an object {forwardSeconds, backwardSeconds}"],
      [{ ops: [{ op: "linear", shape: FC_KEY, forwardSeconds: 1e-3, backwardSeconds: 0, backwardOps: 1.5, allCores: { forwardSeconds: 1, backwardSeconds: 1 } }] }, "calibration c.json: ops[0].backwardOps must be an integer of at least 0, got 1.5"],
      [{ optimizer: { stateBytes: 10, seconds: -1, allCoresSeconds: 0, ops: 1 } }, "calibration c.json: optimizer.seconds must be a non-negative number of seconds, got -1"],
      [{ host: { instructionSeconds: 1e-6, loopSeconds: 0, handoffSeconds: 0, step: [] } }, "calibration c.json: host.step must be a non-empty array of {devices, seconds}"],
      [{ host: { instructionSeconds: 1e-6, loopSeconds: 0, handoffSeconds: 0, step: [{ devices: 2, seconds: 1e-5 }, { devices: 2, seconds: 2e-5 }] } }, "calibration c.json: host.step[1].devices must be larger than host.step[0]'s (2): ascending device counts"],
      [{ host: { instructionSeconds: "fast", loopSeconds: 0, handoffSeconds: 0, step: [{ devices: 1, seconds: 1e-5 }] } }, 'calibration c.json: host.instructionSeconds must be a non-negative number of seconds, got "fast"'],
      [{ host: { instructionSeconds: 1e-6, loopSeconds: 0, step: [{ devices: 1, seconds: 1e-5 }] } }, "calibration c.json: host.handoffSeconds must be a non-negative number of seconds, got undefined"],
      [{ collectives: [{ kind: "all_to_all", ranks: 2, latencySeconds: 0, secondsPerByte: 0, samples: [] }] }, 'calibration c.json: collectives[0].kind must be one of all_gather, reduce_scatter, all_reduce, broadcast, reduce, send_recv, got "all_to_all"'],
      [{ collectives: [{ kind: "all_reduce", ranks: 1, latencySeconds: 0, secondsPerByte: 0, samples: [] }] }, "calibration c.json: collectives[0].ranks must be an integer of at least 2, got 1"],
      [{ collectives: [{ kind: "all_reduce", ranks: 2, latencySeconds: 0, secondsPerByte: 0, samples: [{ bytes: 4096, seconds: null }] }] }, "calibration c.json: collectives[0].samples[0].seconds must be a non-negative number of seconds, got null"],
      [{ collectives: [(file().collectives as unknown[])[0], (file().collectives as unknown[])[0]] }, "calibration c.json: collectives[1] repeats kind 'all_reduce' with ranks 2"],
      [{ contention: [{ devices: 1, slowdown: 1 }, { devices: 2, slowdown: 0.5 }] }, "calibration c.json: contention[1].slowdown must be a number of at least 1 (devices at once are never faster than one alone), got 0.5"],
      [{ contention: [{ devices: 2, slowdown: 1 }, { devices: 1, slowdown: 1 }] }, "calibration c.json: contention[1].devices must be larger than contention[0]'s (2): ascending device counts"],
      [{ contention: [] }, "calibration c.json: 'contention' must be a non-empty array of {devices, slowdown}"],
    ];
    for (const [over, message] of cases) {
      expect(() => parse(file(over)), message).toThrow(CalibrationError);
      expect(() => parse(file(over))).toThrow(message);
    }
  });

  it("a corrupt file is a located error from compile, without a stack trace", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-cal2-"));
    const path = join(dir, "bad.json");
    writeFileSync(path, JSON.stringify(file({ host: { instructionSeconds: 1e-6, loopSeconds: 0, handoffSeconds: 0, step: [{ devices: 0, seconds: 1e-5 }] } })));
    const r = await runCli("compile", join(root, "samples/mlp.fsm"), "--devices", "1", "--calibration", path, "-o", join(dir, "p.json"));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`calibration ${path}: host.step[0].devices must be an integer of at least 1, got 0`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe("the pricing of a version-2 calibration", () => {
  const cal = parse(file());

  it("shares the cores out: N devices on C cores get ⌊C/N⌋ threads each, and run N/C slower when N > C", () => {
    expect(coreShare(2, 1)).toEqual({ threads: 2, slowdown: 1 });
    expect(coreShare(2, 2)).toEqual({ threads: 1, slowdown: 1 });
    expect(coreShare(2, 4)).toEqual({ threads: 1, slowdown: 2 });
    expect(coreShare(16, 4)).toEqual({ threads: 4, slowdown: 1 });
    // 4 threads of 16: a third of the way from one thread to all of them in 1/k (1 − 1/4 over 1 − 1/16 = 0.8).
    expect(threadedSeconds(1, 0.5, 16, 4)).toBeCloseTo(1 - 0.5 * 0.8, 12);
  });

  it("a measured contention replaces N/C: linear between measured device counts, in proportion to N beyond", () => {
    const measured = [{ devices: 1, slowdown: 1 }, { devices: 2, slowdown: 1.2 }, { devices: 4, slowdown: 3 }];
    expect(coreShare(2, 3, measured)).toEqual({ threads: 1, slowdown: 2.1 });
    expect(coreShare(2, 8, measured)).toEqual({ threads: 1, slowdown: 6 });
    expect(coreShare(2, 1, measured)).toEqual({ threads: 2, slowdown: 1 });
    const withContention = parse(file({ contention: measured }));
    expect(withContention.contention).toEqual(measured);
    const model = checkFile(join(root, "samples/gpt-tiny.fsm")).model!;
    const fc = model.graph.ops().find((o) => o.scope === "layers.0.mlp.fc")!;
    const e = estimateOp(model.graph, fc.id, { cluster: clusterFor("cpu", 4, withContention), precision: "fp32", bindings: { B: 8, S: 16 } });
    expect(e.forwardSeconds).toBeCloseTo(3 * (1e-3 + 1e-6), 12);
  });

  it("a measured op: its time at the device's threads, the dispatch per instruction, the cores' slowdown", () => {
    const model = checkFile(join(root, "samples/gpt-tiny.fsm")).model!;
    const g = model.graph;
    const fc = g.ops().find((o) => o.scope === "layers.0.mlp.fc")!;
    expect(shapeKey(fc.inputs.map((t) => g.tensor(t).type), fc.attrs, { B: 8, S: 16 })).toBe(FC_KEY);
    const op = (devices: number) => estimateOp(g, fc.id, { cluster: clusterFor("cpu", devices, cal), precision: "fp32", bindings: { B: 8, S: 16 } });
    // 1 device: both cores (0.6 ms, 1.2 ms), one dispatch forward, three backward.
    expect(op(1).forwardSeconds).toBeCloseTo(0.6e-3 + 1e-6, 12);
    expect(op(1).backwardSeconds).toBeCloseTo(1.2e-3 + 3e-6, 12);
    // 2 devices: one core each.
    expect(op(2).forwardSeconds).toBeCloseTo(1e-3 + 1e-6, 12);
    expect(op(2).backwardSeconds).toBeCloseTo(2e-3 + 3e-6, 12);
    // 4 devices on 2 cores: one core each, shared: twice as long.
    expect(op(4).forwardSeconds).toBeCloseTo(2 * (1e-3 + 1e-6), 12);
    expect(op(4).backwardSeconds).toBeCloseTo(2 * (2e-3 + 3e-6), 12);
  });

  it("a collective: α + β·bytes of its kind and group size; other sizes scaled as a ring; unmeasured kinds keep the α-β model", () => {
    const c4 = clusterFor("cpu", 4, cal);
    // α + β·bytes and the 2 µs hand-off between the compute and communication threads.
    expect(groupCollectiveTime(c4, "all_reduce", 1000, [0, 1])).toBeCloseTo(10e-6 + 1000e-9 + 2e-6, 15);
    // The in-process communicator whatever the profile's nodes: ranks 1 and 2 are on different cpu "nodes".
    expect(groupCollectiveTime(c4, "all_reduce", 1000, [1, 2])).toBeCloseTo(10e-6 + 1000e-9 + 2e-6, 15);
    expect(collectiveTime("send_recv", 5000, 2, groupLink(c4, [0, 3]))).toBeCloseTo(3e-6 + 5000 * 2e-10 + 2e-6, 15);
    // 4 ranks from the 2-rank fit: 3× the steps of α, (3/4)/(1/2) = 1.5× the bytes.
    expect(groupCollectiveTime(c4, "all_reduce", 1000, [0, 1, 2, 3])).toBeCloseTo(3 * 10e-6 + 1.5 * 1000e-9 + 2e-6, 15);
    const uncalibrated = clusterFor("cpu", 4);
    expect(groupCollectiveTime(c4, "all_gather", 1000, [0, 1])).toBe(groupCollectiveTime(uncalibrated, "all_gather", 1000, [0, 1]));
    expect(groupCollectiveTime(c4, "all_reduce", 1000, [2])).toBe(0);
  });

  it("the optimizer by its measured time per byte of state; the host's empty step by device count", () => {
    // 1 device: both cores, 30 µs for 1000 bytes, plus 10 dispatches of 1 µs: 40 µs per 1000 bytes.
    expect(calibratedOptimizerSeconds(clusterFor("cpu", 1, cal), 500)).toBeCloseTo(20e-6, 15);
    // 4 devices: one core (40 µs + 10 µs), twice as slow.
    expect(calibratedOptimizerSeconds(clusterFor("cpu", 4, cal), 500)).toBeCloseTo(2 * 25e-6, 15);
    expect(calibratedOptimizerSeconds(clusterFor("cpu", 4), 500)).toBeUndefined();
    // The empty step interpolated between 1 (10 µs) and 4 devices (40 µs), the last one's beyond; no batch.
    const host = (devices: number) => hostStepSeconds(clusterFor("cpu", devices, cal));
    expect(host(1)).toEqual({ empty: 10e-6, hidden: 0 });
    expect(host(2).empty).toBeCloseTo(20e-6, 15);
    expect(host(8).empty).toBeCloseTo(40e-6, 15);
    expect(hostStepSeconds(clusterFor("cpu", 8))).toEqual({ empty: 0, hidden: 0 });
    // The batch hides device work only where the devices leave the main thread a core: 1 device of 2 cores.
    const batched = parse(file({ host: { ...(file().host as object), batchSeconds: 7e-6 } }));
    expect(hostStepSeconds(clusterFor("cpu", 1, batched))).toEqual({ empty: 10e-6, hidden: 7e-6 });
    expect(hostStepSeconds(clusterFor("cpu", 2, batched)).hidden).toBe(0);
  });

  it("a file with blocking empty steps: the step is the less of the two ways the run loop may take it", () => {
    const both = parse(file({ host: { ...(file().host as object), batchSeconds: 30e-6, blockingStep: [{ devices: 1, seconds: 50e-6 }, { devices: 4, seconds: 20e-6 }] } }));
    const host1 = hostStepSeconds(clusterFor("cpu", 1, both));
    expect(host1).toEqual({ empty: 10e-6, hidden: 30e-6, blocking: 50e-6 });
    // Overlapped: 10 + max(0, M − 30); blocking: 50 + M. A short makespan hides behind the batch.
    expect(hostedStepSeconds(host1, 20e-6)).toBeCloseTo(10e-6, 15);
    expect(hostedStepSeconds(host1, 100e-6)).toBeCloseTo(80e-6, 15);
    // 4 devices: nothing hidden; overlapped 40 + M, blocking 20 + M.
    const host4 = hostStepSeconds(clusterFor("cpu", 4, both));
    expect(hostedStepSeconds(host4, 100e-6)).toBeCloseTo(120e-6, 15);
    // Past the step length the run loop tries blocking at (host-policy.ts), overlapped only: 40 + 3 ms.
    expect(hostedStepSeconds(host4, 3e-3)).toBeCloseTo(40e-6 + 3e-3, 15);
    // Without blocking steps: overlapped only.
    expect(hostedStepSeconds(hostStepSeconds(clusterFor("cpu", 4, cal)), 100e-6)).toBeCloseTo(140e-6, 15);
  });

  it("a version-2 file's step (the executor's start and finish) is read as an empty step: plus the loop, and the batch where longer", () => {
    const v2 = (batchSeconds?: number) => parse(file({ version: 2, host: { ...(file().host as object), ...(batchSeconds !== undefined && { batchSeconds }) } })).host!.step;
    // loop 5 µs + max(step, batch).
    expect(v2().map((x) => x.seconds)).toEqual([5e-6 + 10e-6, 5e-6 + 40e-6]);
    expect(v2(20e-6).map((x) => x.seconds)).toEqual([5e-6 + 20e-6, 5e-6 + 40e-6]);
    expect(parse(file()).host!.step.map((x) => x.seconds)).toEqual([10e-6, 40e-6]);
  });

  it("a compiled plan's predicted step: the empty step plus the makespan, less what the next batch's making hides on a core of its own", () => {
    const model = checkFile(join(root, "samples/mlp.fsm"), {}).model!;
    const compile = (devices: number, host: Record<string, unknown>) =>
      compileModel(model, { cluster: "cpu", devices, source: "mlp.fsm", fsmVersion: "test", calibration: parse(file({ host: { ...(file().host as object), ...host } })) }).plan;
    const empty = (seconds: number) => ({ step: [{ devices: 1, seconds }, { devices: 4, seconds }] });
    const a = compile(1, empty(0));
    const b = compile(1, empty(0.25));
    expect(b.settings).toEqual(a.settings);
    expect(b.predicted.stepTimeSeconds - a.predicted.stepTimeSeconds).toBeCloseTo(0.25, 9);
    // 1 device on 2 cores: a batch longer than the makespan hides all of it (the step is the empty one); a
    // shorter one hides as much of it as it takes.
    expect(compile(1, { ...empty(0.25), batchSeconds: 3 }).predicted.stepTimeSeconds).toBe(0.25);
    const makespan = a.predicted.stepTimeSeconds;
    expect(compile(1, { ...empty(0.25), batchSeconds: makespan / 4 }).predicted.stepTimeSeconds).toBeCloseTo(0.25 + (3 * makespan) / 4, 12);
    // 2 devices take both cores: the batch hides nothing (its making is in the empty step, measured so).
    const two = compile(2, empty(0.25));
    expect(compile(2, { ...empty(0.25), batchSeconds: 3 }).predicted.stepTimeSeconds).toBe(two.predicted.stepTimeSeconds);
    expect(two.predicted.stepTimeSeconds).toBeGreaterThan(0.25);
  });

  it("a version-1 file prices its ops as they are and adds nothing else", () => {
    const v1 = parse({ format: "fsm-calibration", version: 1, profile: "cpu", machine: "m", date: "2025-01-31", ops: [{ op: "linear", shape: FC_KEY, forwardSeconds: 1e-3, backwardSeconds: 2e-3 }] });
    const model = checkFile(join(root, "samples/gpt-tiny.fsm")).model!;
    const fc = model.graph.ops().find((o) => o.scope === "layers.0.mlp.fc")!;
    const e = estimateOp(model.graph, fc.id, { cluster: clusterFor("cpu", 4, v1), precision: "fp32", bindings: { B: 8, S: 16 } });
    expect([e.forwardSeconds, e.backwardSeconds]).toEqual([1e-3, 2e-3]);
    expect(hostStepSeconds(clusterFor("cpu", 4, v1))).toEqual({ empty: 0, hidden: 0 });
    expect(groupCollectiveTime(clusterFor("cpu", 4, v1), "all_reduce", 1000, [0, 1])).toBe(groupCollectiveTime(clusterFor("cpu", 4), "all_reduce", 1000, [0, 1]));
  });
});
