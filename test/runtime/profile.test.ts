// `fsm run --profile`: per-kernel work from the lowered program's shapes (checked against hand counts), the
// recorder's arithmetic on hand-made timings, its consistency with the native executor's traced steps (every
// stream's kernel times add up to the stream's busy time; every instruction kind appears), the peaks it is
// set against, and the CLI's table and JSON. No assertion about speed: only about how the times add up.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { lower } from "../../src/lower/lower.js";
import { COMM, COMPUTE, DeviceBuilder, type DeviceProgram } from "../../src/lower/device-program.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { unionIntervals, type Interval } from "../../src/runtime/overlap.js";
import { formatProfile, instructionWork, phaseOf, ProfileRecorder, type DeviceTimings } from "../../src/runtime/profile.js";
import { blasThreadsFor, measurePeaks, type Peaks } from "../../src/runtime/profile-peaks.js";
import type { TraceEvent } from "../../src/runtime/trace.js";
import { runCli } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";

function compile(name: "mlp" | "gpt-tiny", devices: number, overrides: Readonly<Record<string, string | number>> = {}): Plan {
  const model = checkFile(samplePath(name), { overrides: sets(overrides) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: samplePath(name), fsmVersion: "test" }).plan;
}

const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** Round figures, so expected rates are exact. */
const PEAKS: Peaks = { flopsPerSecond: 1e9, bytesPerSecond: 1e8, devices: 1, kind: "cpu", blasThreads: 1, cores: 1, method: "test figures" };

describe("instructionWork", () => {
  const plan = compile("gpt-tiny", 1);
  const program = lower(plan, graphFromJson(plan.model.name, plan.graph), [0]).devices[0]!;
  const shape = (slot: number): readonly number[] => program.slots[slot]!.shape;
  const of = (op: string) => program.instructions.filter((i) => i.op === op);

  it("prices linear and its gradients at 2·M·N·K from the shapes (plus M·N for a bias)", () => {
    // linear(x [..., K], W [N, K], b [N]?) → [..., N]; linear_grad_input(dy [..., N], W [N, K]) → [..., K];
    // linear_grad_weight(dy [..., N], x [..., K]) → [N, K]. M = the rows.
    const linear = of("linear");
    expect(linear.length).toBe(5); // 2 layers × 2 MLP linears, and the tied head (no bias)
    expect(linear.filter((i) => i.inputs.length === 2)).toHaveLength(1);
    for (const ins of linear) {
      const [x, w] = [shape(ins.inputs[0]!), shape(ins.inputs[1]!)];
      const [N, K] = [w[0]!, w[1]!];
      const M = numel(x) / K;
      const bias = ins.inputs.length === 3 ? M * N : 0;
      expect(instructionWork(program, ins).flops).toBe(2 * M * N * K + bias);
    }
    for (const ins of of("linear_grad_input")) {
      const [dy, w] = [shape(ins.inputs[0]!), shape(ins.inputs[1]!)];
      const [N, K] = [w[0]!, w[1]!];
      expect(instructionWork(program, ins).flops).toBe(2 * (numel(dy) / N) * N * K);
    }
    expect(of("linear_grad_weight").length).toBe(9);
    for (const ins of of("linear_grad_weight")) {
      const [dy, x] = [shape(ins.inputs[0]!), shape(ins.inputs[1]!)];
      const N = dy[dy.length - 1]!;
      const K = x[x.length - 1]!;
      expect(instructionWork(program, ins).flops).toBe(2 * (numel(dy) / N) * N * K);
    }
  });

  it("counts attention_grad_input's recomputed forward with its input gradient", () => {
    // gpt-tiny: B = 8, S = 16, d = 32, 4 heads, qkv width 96, biases; T = B·S = 128 tokens.
    const [B, S, d, H] = [8, 16, 32, 4];
    const T = B * S;
    const qkv = 2 * T * d * 3 * d; // the QKV projection
    const proj = 2 * T * d * d; // the output projection
    const core = 4 * B * S * S * d; // q·kᵀ and p·v over the full S×S
    const scores = B * H * S * S;
    // backward input (registry): both projections, the core twice, scores × (scale 1 + softmax 4);
    // recomputed: the QKV projection and its bias, the core, scores × (scale 1 + softmax 5).
    const expected = qkv + proj + 2 * core + 5 * scores + (qkv + T * 3 * d + core + 6 * scores);
    const list = of("attention_grad_input");
    expect(list).toHaveLength(2);
    for (const ins of list) expect(instructionWork(program, ins).flops).toBe(expected);
  });

  it("counts bytes as every operand read and every output written once; helpers and communication have no FLOPs", () => {
    for (const ins of program.instructions) {
      const bytes = [...ins.inputs, ...ins.outputs].reduce((n, s) => n + numel(shape(s)) * 4, 0); // all f32/i32
      const w = instructionWork(program, ins);
      expect(w.bytes, ins.op).toBe(bytes);
      if (ins.op.startsWith("fsm_") || ins.op.startsWith("comm.")) expect(w.flops, ins.op).toBeUndefined();
    }
    const sumTo = of("sum_to")[0]!;
    expect(instructionWork(program, sumTo).flops).toBe(numel(shape(sumTo.inputs[0]!)));
  });
});

describe("ProfileRecorder on hand-made timings", () => {
  // Two devices, each a linear [4, 8]·[16, 8]ᵀ on compute and an all-reduce of its [4, 16] output on comm.
  function program(): DeviceProgram {
    const b = new DeviceBuilder();
    const [x, w, y] = [b.pin(b.slot([4, 8])), b.pin(b.slot([16, 8])), b.pin(b.slot([4, 16]))];
    b.emit(COMPUTE, "linear", [x, w], [y], { in: 8, out: 16, bias: false }, "0F0");
    b.emit(COMM, "comm.allReduce", [y], [y], { group: [0, 1] }, "0ALL_REDUCE");
    b.emit(COMPUTE, "fsm_scale", [y], [y], { scale: 0.5 }, "0OPTIMIZER", { inPlace: true });
    return b.finish();
  }
  const p = program();
  const step = (linear: number, comm: number, scale: number): Float64Array => Float64Array.from([0, linear, linear, linear + comm, linear + comm, linear + comm + scale]);

  it("leaves the first step out, averages steps and devices, and rates the work against the peaks", () => {
    const r = new ProfileRecorder([0, 1]);
    r.add(1, [{ program: p, timings: step(1, 1, 1) }, { program: p, timings: step(1, 1, 1) }], 5); // warm-up: ignored
    r.add(2, [{ program: p, timings: step(2e-6, 1e-6, 1e-6) }, { program: p, timings: step(4e-6, 3e-6, 1e-6) }], 1e-5);
    r.add(3, [{ program: p, timings: step(2e-6, 1e-6, 1e-6) }, { program: p, timings: step(4e-6, 3e-6, 1e-6) }], 2e-5);
    const prof = r.finish(PEAKS);
    expect(prof.steps).toEqual([2, 3]);
    expect(prof.warmupLeftOut).toBe(true);
    expect(prof.devices).toEqual([0, 1]);
    const linear = prof.kernels.find((k) => k.op === "linear")!;
    expect(linear.stream).toBe("compute");
    expect(linear.callsPerStep).toBe(1);
    expect(linear.secondsPerStep).toBeCloseTo(3e-6, 15); // (2 + 4) / 2 µs
    expect(linear.flopsPerStep).toBe(2 * 4 * 16 * 8);
    expect(linear.bytesPerStep).toBe((32 + 128 + 64) * 4);
    expect(linear.flopsPerSecond).toBeCloseTo(1024 / 3e-6, 3);
    expect(linear.fractionOfPeakFlops).toBeCloseTo(1024 / 3e-6 / 1e9, 9);
    expect(linear.fractionOfPeakBandwidth).toBeCloseTo(896 / 3e-6 / 1e8, 9);
    // At the peaks: max(1024 / 1e9, 896 / 1e8) = 8.96 µs, over the 3 µs taken.
    expect(linear.rooflineFraction).toBeCloseTo(8.96e-6 / 3e-6, 9);
    const comm = prof.kernels.find((k) => k.op === "comm.allReduce")!;
    expect(comm.stream).toBe("communication");
    expect(comm.secondsPerStep).toBeCloseTo(2e-6, 15);
    expect(comm.flopsPerStep).toBeUndefined();
    expect(comm.bytesPerStep).toBe(2 * 64 * 4);
    // The span: device 0 runs 4 µs, device 1 8 µs → 6 µs.
    expect(prof.spanSeconds).toBeCloseTo(6e-6, 15);
    expect(linear.shareOfStep).toBeCloseTo(0.5, 9);
    expect(prof.streams.compute.busySeconds).toBeCloseTo(4e-6, 15); // linear 3 + fsm_scale 1
    expect(prof.streams.communication.busySeconds).toBeCloseTo(2e-6, 15);
    expect(prof.kernels.map((k) => k.op)).toEqual(["linear", "comm.allReduce", "fsm_scale"]); // longest first
    expect(prof.phases.map((x) => [x.phase, x.stream])).toEqual([["forward", "compute"], ["all_reduce", "communication"], ["optimizer", "compute"]]);
    expect(prof.wallSeconds).toBeCloseTo(1.5e-5, 15); // the mean of steps 2 and 3
  });

  it("profiles the only step when there is one, and says so", () => {
    const r = new ProfileRecorder([0]);
    r.add(7, [{ program: p, timings: step(1e-3, 0, 0) }]);
    const prof = r.finish(PEAKS);
    expect(prof.warmupLeftOut).toBe(false);
    expect(prof.steps).toEqual([7]);
    expect(prof.kernels[0]!.secondsPerStep).toBeCloseTo(1e-3, 12);
    expect(formatProfile(prof)).toContain("the only step: warm-up included");
  });

  it("refuses timings that do not match the programs", () => {
    const r = new ProfileRecorder([0, 1]);
    expect(() => r.add(1, [{ program: p, timings: step(1, 1, 1) }])).toThrow(/1 devices' timings, expected 2/);
    expect(() => r.add(1, [{ program: p, timings: new Float64Array(2) }, { program: p, timings: new Float64Array(2) }])).toThrow(/2 timings for 3 instructions/);
    expect(() => new ProfileRecorder([0]).finish(PEAKS)).toThrow(/no step/);
  });

  it("names phases by their plan action", () => {
    expect(["1F3", "0R2", "0B1", "2I0", "2W0", "0OPTIMIZER", "0ALL_GATHER2u1", "2SEND_F3@3", "nonsense"].map(phaseOf)).toEqual([
      "forward", "recompute", "backward", "backward", "backward", "optimizer", "all_gather", "send_f", "other",
    ]);
  });
});

describe("the profile of real runs adds up to the traced steps", () => {
  const cases: [string, "mlp" | "gpt-tiny", number, Record<string, string | number>][] = [
    ["mlp, 1 device", "mlp", 1, {}],
    ["mlp, 2 pipeline stages", "mlp", 2, { stages: 2, data_parallel: 1 }],
    ["gpt-tiny, 1 device", "gpt-tiny", 1, {}],
    ["gpt-tiny, FSDP over 2 devices", "gpt-tiny", 2, { shard: "fsdp", stages: 1 }],
  ];
  it.each(cases)("%s", async (_name, sample, devices, overrides) => {
    const plan = compile(sample, devices, overrides);
    const raw: { step: number; devices: DeviceTimings[] }[] = [];
    const recorder = new ProfileRecorder(Array.from({ length: devices }, (_, i) => i));
    let trace: TraceEvent[] = [];
    const walls: number[] = [];
    const reported: number[] = [];
    const summary = await runPlan(plan, {
      steps: 3,
      engine: "native",
      trace: true,
      onTimings: (step, list, seconds) => {
        raw.push({ step, devices: list.map((d) => ({ program: d.program, timings: Float64Array.from(d.timings) })) });
        recorder.add(step, list, seconds);
        walls.push(seconds);
      },
      onDone: (_engine, events) => (trace = events),
      onStep: (r) => reported.push(r.seconds),
    });
    expect(raw.map((r) => r.step)).toEqual([1, 2, 3]);
    const prof = recorder.finish(PEAKS);
    expect(prof.steps).toEqual([2, 3]);
    // The wall times the hook gives are the steps' as reported, and the profile's is the mean of steps 2 and 3.
    expect(walls).toEqual(reported);
    expect(prof.wallSeconds).toBeCloseTo((reported[1]! + reported[2]!) / 2, 12);
    expect(summary.steps).toBe(3);
    const later = raw.slice(1);
    const pairs = later.length * devices;

    // Each stream's busy time, per step and device, from the raw timings as a union of intervals (a stream runs
    // one instruction at a time, so the union is its busy time), against the sum of the profile's kernels.
    for (const [stream, name] of [[COMPUTE, "compute"], [COMM, "communication"]] as const) {
      let busy = 0;
      for (const r of later) {
        for (const d of r.devices) {
          const intervals: Interval[] = d.program.instructions.flatMap((ins, k) => (ins.stream === stream ? [[d.timings[2 * k]!, d.timings[2 * k + 1]!] as Interval] : []));
          busy += unionIntervals(intervals).reduce((s, [a, b]) => s + (b - a), 0);
        }
      }
      busy /= pairs;
      const kernels = prof.kernels.filter((k) => k.stream === name).reduce((s, k) => s + k.secondsPerStep, 0);
      expect(kernels, name).toBeCloseTo(busy, 9);
      expect(prof.streams[name].busySeconds, name).toBeCloseTo(busy, 9);
      const phases = prof.phases.filter((x) => x.stream === name).reduce((s, x) => s + x.secondsPerStep, 0);
      expect(phases, name).toBeCloseTo(busy, 9);
      // The Chrome trace's events of the same steps cover every instruction (an event spans a run of one
      // action's instructions, gaps between them included): never less than the kernels' time.
      const traced = trace.filter((e) => e.ph === "X" && e.tid === stream && (e.args?.step as number) >= 2).reduce((s, e) => s + e.dur! * 1e-6, 0) / pairs;
      expect(traced, name).toBeGreaterThanOrEqual(kernels * (1 - 1e-9));
    }
    expect(prof.streams.compute.busySeconds).toBeGreaterThan(0);
    expect(prof.spanSeconds).toBeGreaterThanOrEqual(prof.streams.compute.busySeconds * (1 - 1e-9));

    // Every instruction kind (op on its stream) appears, with its calls per step and device.
    const programs = raw[0]!.devices.map((d) => d.program);
    const want = new Map<string, number>();
    for (const p of programs) for (const ins of p.instructions) {
      const key = `${ins.stream === COMM ? "communication" : "compute"}:${ins.op}`;
      want.set(key, (want.get(key) ?? 0) + 1 / devices);
    }
    const got = new Map(prof.kernels.map((k) => [`${k.stream}:${k.op}`, k.callsPerStep]));
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [key, n] of want) expect(got.get(key), key).toBeCloseTo(n, 12);
    if (devices > 1) expect(prof.kernels.some((k) => k.stream === "communication" && k.op.startsWith("comm."))).toBe(true);
    // A linear kernel is priced; its rate is its FLOPs over its time.
    const linear = prof.kernels.find((k) => k.op === "linear")!;
    expect(linear.flopsPerSecond).toBeCloseTo(linear.flopsPerStep! / linear.secondsPerStep, 3);
  }, 60_000);
});

describe("measurePeaks", () => {
  it("measures one device's sgemm rate and copy bandwidth with the run's BLAS threads", async () => {
    for (const devices of [1, 2]) {
      const p = await measurePeaks(devices);
      expect(p.devices).toBe(devices);
      expect(p.blasThreads).toBe(blasThreadsFor(devices));
      // Plausible units, not speed: any CPU multiplies faster than 0.1 GFLOP/s and copies faster than 0.1 GB/s,
      // and none reaches 100 TFLOP/s or 10 TB/s on one device.
      expect(p.flopsPerSecond).toBeGreaterThan(1e8);
      expect(p.flopsPerSecond).toBeLessThan(1e14);
      expect(p.bytesPerSecond).toBeGreaterThan(1e8);
      expect(p.bytesPerSecond).toBeLessThan(1e13);
      expect(p.method).toContain("sgemm 512×512×512");
    }
    await expect(measurePeaks(0)).rejects.toThrow(/positive integer/);
  });
});

describe("fsm run --profile", () => {
  it("prints the per-kernel table with the peaks it used, and exits 0", async () => {
    const r = await runCli("run", samplePath("gpt-tiny"), "--steps", "3", "--profile");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^profile: steps 2–3, the warm-up step left out; per step, device 0$/m);
    expect(r.stdout).toMatch(/^peaks per device: sgemm \d+\.\d GFLOP\/s, memory \d+\.\d GB\/s \(measured now on 1 device/m);
    expect(r.stdout).toMatch(/^compute stream by phase: .*backward [\d.]+ ms \([\d.]+× forward's time, [\d.]+× its FLOPs\)/m);
    expect(r.stdout).toMatch(/^compute stream\s+calls\s+ms\/step\s+%step\s+GFLOP\/s\s+%peak\s+GB\/s\s+%peak\s+%roof$/m);
    expect(r.stdout).toMatch(/^ {2}attention_grad_input\s+2\s+[\d.]+\s+[\d.]+%/m);
    expect(r.stdout).toMatch(/^ {2}other \(\d+ kernels\)/m); // gpt-tiny has more than 15 kernels
    // Every compute instruction of its 1-device program, once a step (no averaging: one replica, one micro-batch).
    expect(r.stdout).toMatch(/^ {2}total\s+135\s/m);
    expect(r.stdout).not.toContain("communication stream  "); // one device: nothing on the comm stream
  }, 60_000);

  it("puts the profile in --json's summary", async () => {
    const r = await runCli("run", samplePath("mlp"), "--devices", "2", "--steps", "3", "--profile", "--json");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const summary = lines[lines.length - 1]!.summary as { profile: { devices: number[]; peaks: Peaks; kernels: { op: string; stream: string; secondsPerStep: number }[]; steps: number[] } };
    expect(summary.profile.devices).toEqual([0, 1]);
    expect(summary.profile.steps).toEqual([2, 3]);
    expect(summary.profile.peaks.devices).toBe(2);
    expect(summary.profile.peaks.flopsPerSecond).toBeGreaterThan(0);
    expect(summary.profile.kernels.map((k) => k.op)).toContain("linear");
    expect(summary.profile.kernels.some((k) => k.stream === "communication")).toBe(true);
    expect(lines.slice(0, -1).every((l) => typeof l.step === "number")).toBe(true); // no table in JSON mode
  }, 60_000);

  it("is refused where it cannot time instructions", async () => {
    const engine = await runCli("run", samplePath("mlp"), "--steps", "1", "--profile", "--engine", "reference");
    expect(engine.code).toBe(2);
    expect(engine.stderr).toContain("--profile times the native engine's instructions, not --engine reference");
  }, 60_000);

  it("profiles the CUDA device (here its emulation) against peaks measured on it: cuBLAS products, device-timed", async () => {
    const r = await runCli("run", samplePath("mlp"), "--devices", "2", "--steps", "3", "--profile", "--device", "simt", "--json");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const summary = lines[lines.length - 1]!.summary as { profile: { peaks: Peaks; kernels: { op: string; secondsPerStep: number }[] } };
    expect(summary.profile.peaks).toMatchObject({ kind: "simt", devices: 2 });
    expect(summary.profile.peaks.method).toMatch(/^measured now on each of 2 simt devices at once \(the CUDA device's code emulated on the CPU\)/);
    expect(summary.profile.peaks.flopsPerSecond).toBeGreaterThan(0);
    const linear = summary.profile.kernels.find((k) => k.op === "linear")!;
    expect(linear.secondsPerStep).toBeGreaterThan(0);
  }, 120_000);
});
