// `fsm run --profile`: where each step's time goes, per kernel. From the native executor's per-instruction
// start and end times (the ones `--trace` draws), every instruction's time is added to its kernel — its op on
// its stream, so a kernel the communication stream runs (FSDP's fsm_scale, sum_squares) is a row of its own —
// over the steps after the first (the warm-up: first touches, thread start) and over this process's devices,
// and reported per step and per device (the mean over devices). Each kernel's work per instruction comes from
// the lowered program's concrete shapes:
//
//   FLOPs  the op registry's cost rule (src/graph/ops/*.ts) at the instruction's operand shapes: a forward op's
//          own forwardFlops; a gradient op's part of its forward op's backwardFlops (linear_grad_input: the
//          input part; linear_grad_weight, layer_norm_grad_weight: the weight part without the bias term, which
//          sum_to computes); attention_grad_input also recomputes the forward (QKV projection, scores and
//          context; FlashAttention-style), so its FLOPs are the input part plus that recomputation — the work
//          the kernel executes, which is what an achieved rate must count. sum_to is one add per element read.
//          Other kernels (fsm_* helpers, the optimizer, norms of gradients, communication) have no FLOPs here:
//          bytes only.
//   bytes  every operand read once and every output written once, at its slot's element type — a lower
//          bound on the memory traffic (an operand read twice, a cache miss, the zeroing of an output before
//          its kernel all add to it). For a collective, its buffers as one device's kernel would move them.
//
// A kernel's time includes zeroing its outputs (the executor zeroes every output a kernel does not update in
// place) and, for communication, waiting for the peers. Achieved rates are set against this machine's peaks
// (profile-peaks.ts): a kernel's roofline fraction is the time it would take at the peaks, the larger of
// FLOPs / peak FLOP/s and bytes / peak bandwidth, over the time it took.
import { BYTES, COMM, type DeviceInstruction, type DeviceProgram, type DeviceSlot } from "../lower/device-program.js";
import { dim } from "../graph/dim.js";
import type { OpCost } from "../graph/op-cost.js";
import { getOp, withDefaults } from "../graph/registry.js";
import type { Attrs, TensorType } from "../graph/types.js";
import { attentionWidths } from "../graph/ops/attention.js";
import { ELEMENTWISE_FLOPS, matmulFlops } from "../graph/ops/cost-rules.js";
import { parseAction } from "../schedule/action.js";
import type { Peaks } from "./profile-peaks.js";

export type StreamName = "compute" | "communication";

export interface InstructionWork {
  /** Executed FLOPs, where the op registry prices the kernel (see the header); absent: bytes only. */
  readonly flops?: number;
  /** Bytes of the operands read and the outputs written. */
  readonly bytes: number;
}

const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

function typeOf(slot: DeviceSlot): TensorType {
  return { dtype: slot.dtype, shape: slot.shape.map((n) => dim(n)) };
}

/** A registry op's cost at concrete operand types and attributes (declared defaults filled in). */
function registryCost(op: string, inputs: readonly TensorType[], attrs: Attrs): OpCost {
  const def = getOp(op);
  if (!def?.cost) throw new Error(`internal: op '${op}' has no cost rule`);
  return def.cost(inputs, withDefaults(def.attrs, attrs), {});
}

/** A concrete type's dimensions as numbers (typeOf's dims are constants). */
const sizes = (t: TensorType): number[] => t.shape.map((d) => d.coef);
const lastDim = (t: TensorType): number => sizes(t)[t.shape.length - 1]!;

/** Gradient kernels priced through their forward op's cost rule: which forward operands they stand for (from
 *  their own operand and output types) and which part of its backward they compute. */
const GRADIENTS: Readonly<Record<string, (ins: readonly TensorType[], outs: readonly TensorType[], attrs: Attrs) => number>> = {
  // dx [..., in] = dy [..., out] · W [out, in]
  linear_grad_input: ([, w], [dx]) => registryCost("linear", [dx!, w!], { in: lastDim(dx!), out: sizes(w!)[0]!, bias: false }).backwardFlops.input,
  // dW [out, in] = dyᵀ [out, rows] · x [rows, in] (the bias's row sum is sum_to's)
  linear_grad_weight: ([dy, x], [dw]) => registryCost("linear", [x!, dw!], { in: lastDim(x!), out: lastDim(dy!), bias: false }).backwardFlops.weight,
  // The input part of the backward, plus the forward it recomputes: everything but the output projection.
  attention_grad_input: ([, x, ...params], _outs, attrs) => {
    const cost = registryCost("attention", [x!, ...params], attrs);
    const full = withDefaults(getOp("attention")!.attrs, attrs);
    const { context, projBias } = attentionWidths(full);
    const tokens = numel(sizes(x!)) / lastDim(x!);
    const d = lastDim(x!);
    const recomputed = cost.forwardFlops - matmulFlops(tokens, context, d) - (projBias ? tokens * d : 0);
    return cost.backwardFlops.input + recomputed;
  },
  layer_norm_grad_input: ([, x, w], _outs, attrs) => registryCost("layer_norm", [x!, w!], { d: lastDim(x!), eps: attrs.eps ?? 1e-5, bias: true }).backwardFlops.input,
  // dγ = Σ dy·x̂ (dβ = Σ dy is sum_to's): the weight part of a layer_norm without a shift.
  layer_norm_grad_weight: ([, x], [dw], attrs) => registryCost("layer_norm", [x!, dw!], { d: lastDim(x!), eps: attrs.eps ?? 1e-5, bias: false }).backwardFlops.weight,
  rms_norm_grad_input: ([, x, w], _outs, attrs) => registryCost("rms_norm", [x!, w!], { d: lastDim(x!), eps: attrs.eps ?? 1e-6 }).backwardFlops.input,
  rms_norm_grad_weight: ([, x], [dw], attrs) => registryCost("rms_norm", [x!, dw!], { d: lastDim(x!), eps: attrs.eps ?? 1e-6 }).backwardFlops.weight,
  gelu_grad: ([, x]) => registryCost("gelu", [x!], {}).backwardFlops.input,
  silu_grad: ([, x]) => registryCost("silu", [x!], {}).backwardFlops.input,
  relu_grad: ([, y]) => registryCost("relu", [y!], {}).backwardFlops.input,
  softmax_grad: ([, y], _outs, attrs) => registryCost("softmax", [y!], attrs).backwardFlops.input,
  cross_entropy_grad: ([, logits, targets], _outs, attrs) => registryCost("cross_entropy", [logits!, targets!], attrs).backwardFlops.input,
  mse_loss_grad: ([, pred, target]) => registryCost("mse_loss", [pred!, target!], {}).backwardFlops.input,
  embedding_grad_weight: ([dy, ids], [dw], attrs) =>
    registryCost("embedding", [ids!, dw!], { ...attrs, num: sizes(dw!)[0]!, dim: lastDim(dy!) }).backwardFlops.weight,
  // A broadcast add's gradient (a bias's): one add per element read.
  sum_to: ([x]) => ELEMENTWISE_FLOPS.add.backward * numel(sizes(x!)),
};

/** What one instruction of a device program reads, writes and computes (see the header). */
export function instructionWork(program: DeviceProgram, ins: DeviceInstruction): InstructionWork {
  const slotBytes = (s: number): number => numel(program.slots[s]!.shape) * BYTES[program.slots[s]!.dtype];
  const bytes = ins.inputs.reduce((n, s) => n + slotBytes(s), 0) + ins.outputs.reduce((n, s) => n + slotBytes(s), 0);
  if (ins.op.startsWith("comm.") || ins.op.startsWith("fsm_")) return { bytes };
  const inputs = ins.inputs.map((s) => typeOf(program.slots[s]!));
  const outputs = ins.outputs.map((s) => typeOf(program.slots[s]!));
  const attrs = ins.attrs as unknown as Attrs;
  try {
    const gradient = GRADIENTS[ins.op];
    if (gradient) return { flops: gradient(inputs, outputs, attrs), bytes };
    if (getOp(ins.op)?.cost) return { flops: registryCost(ins.op, inputs, attrs).forwardFlops, bytes };
  } catch {
    // A rule that does not fit the lowered operands (a tensor-parallel variant, say): bytes only.
  }
  return { bytes };
}

// --- Recording ----------------------------------------------------------------------------------------------

/** One traced step of one device: its program and [start, end] per instruction (seconds). */
export interface DeviceTimings {
  readonly program: DeviceProgram;
  readonly timings: Float64Array;
}

export interface KernelProfile {
  readonly op: string;
  readonly stream: StreamName;
  /** Per step and device (the mean over devices): instructions, seconds, FLOPs and bytes. */
  readonly callsPerStep: number;
  readonly secondsPerStep: number;
  readonly flopsPerStep?: number;
  readonly bytesPerStep: number;
  /** secondsPerStep over the traced step's span (a device's first instruction's start to its last one's end). */
  readonly shareOfStep: number;
  /** Achieved rates (one device's), and their fractions of the peaks. */
  readonly flopsPerSecond?: number;
  readonly bytesPerSecond: number;
  readonly fractionOfPeakFlops?: number;
  readonly fractionOfPeakBandwidth: number;
  /** The time at the peaks (the larger of FLOPs / peak FLOP/s and bytes / peak bandwidth) over the time taken. */
  readonly rooflineFraction: number;
}

export interface StreamProfile {
  /** Seconds per step and device its instructions ran (one at a time on a stream: their sum). */
  readonly busySeconds: number;
  readonly callsPerStep: number;
  readonly shareOfStep: number;
}

/** What part of the step an instruction's plan action is: its forward (F), a checkpoint's recomputed forward
 *  (R), its backward (B, or I and W split), the optimizer step, or a communication action (all_reduce,
 *  all_gather, send_f, ...: its kind in lower case). */
export function phaseOf(action: string): string {
  const parsed = parseAction(action);
  if (!parsed.ok) return "other";
  const kind = parsed.action.kind;
  if (kind === "F") return "forward";
  if (kind === "R") return "recompute";
  if (kind === "B" || kind === "I" || kind === "W") return "backward";
  return kind.toLowerCase();
}

export interface PhaseProfile {
  readonly phase: string;
  readonly stream: StreamName;
  /** Per step and device (the mean over devices). */
  readonly secondsPerStep: number;
  readonly callsPerStep: number;
  readonly flopsPerStep: number;
}

export interface RunProfile {
  /** The steps profiled (numbered over the whole run) and whether the first one (the warm-up) was left out. */
  readonly steps: readonly number[];
  readonly warmupLeftOut: boolean;
  /** The devices (global ranks) whose times are averaged. */
  readonly devices: readonly number[];
  readonly aggregation: "mean per device";
  readonly peaks: Peaks;
  /** Per step, the mean over devices of the traced span: first instruction start to last instruction end. */
  readonly spanSeconds: number;
  /** The profiled steps' mean wall-clock time (the run loop's, from the batch fed to the loss read back), when
   *  add() was told it. */
  readonly wallSeconds?: number;
  readonly streams: { readonly compute: StreamProfile; readonly communication: StreamProfile };
  /** Every kernel, longest first. */
  readonly kernels: readonly KernelProfile[];
  /** Time per phase of the step (phaseOf) and stream, longest first; flopsPerStep counts the priced kernels. */
  readonly phases: readonly PhaseProfile[];
}

interface DeviceTotals {
  readonly rank: number;
  readonly program: DeviceProgram;
  readonly seconds: Float64Array;
  span: number;
}

export class ProfileRecorder {
  /** The warm-up step, kept apart (reported alone only when no other step was recorded). */
  private first: { step: number; devices: DeviceTotals[]; wall?: number } | undefined;
  private later: DeviceTotals[] | undefined;
  private readonly laterSteps: number[] = [];
  private laterWall: number | undefined = 0;

  /** `ranks`: the global rank of each device whose timings add() will be given, in that order. */
  constructor(private readonly ranks: readonly number[]) {}

  /** One step's timings of every device (the engine's lastTimings after the step) and its wall-clock time. */
  add(step: number, devices: readonly DeviceTimings[], wallSeconds?: number): void {
    if (devices.length !== this.ranks.length) throw new Error(`ProfileRecorder: ${devices.length} devices' timings, expected ${this.ranks.length}`);
    const fresh = (): DeviceTotals[] => devices.map((d, i) => ({ rank: this.ranks[i]!, program: d.program, seconds: new Float64Array(d.program.instructions.length), span: 0 }));
    let into: DeviceTotals[];
    if (this.first === undefined) {
      into = fresh();
      this.first = { step, devices: into, ...(wallSeconds !== undefined && { wall: wallSeconds }) };
    } else {
      this.later ??= fresh();
      into = this.later;
      this.laterSteps.push(step);
      this.laterWall = wallSeconds === undefined || this.laterWall === undefined ? undefined : this.laterWall + wallSeconds;
    }
    devices.forEach((d, i) => {
      const n = d.program.instructions.length;
      if (d.timings.length !== 2 * n) throw new Error(`ProfileRecorder: device ${this.ranks[i]} has ${d.timings.length} timings for ${n} instructions`);
      const t = into[i]!;
      let lo = Infinity;
      let hi = -Infinity;
      for (let k = 0; k < n; k++) {
        const [a, b] = [d.timings[2 * k]!, d.timings[2 * k + 1]!];
        t.seconds[k]! += b - a;
        lo = Math.min(lo, a);
        hi = Math.max(hi, b);
      }
      if (n > 0) t.span += hi - lo;
    });
  }

  /** Steps recorded so far. */
  get steps(): number {
    return (this.first ? 1 : 0) + this.laterSteps.length;
  }

  /** The profile of the steps after the first (of the first alone when it is the only one). */
  finish(peaks: Peaks): RunProfile {
    const first = this.first;
    if (first === undefined) throw new Error("ProfileRecorder: no step was recorded");
    const warmupLeftOut = this.later !== undefined;
    const totals = this.later ?? first.devices;
    const steps = warmupLeftOut ? this.laterSteps : [first.step];
    const wall = warmupLeftOut ? (this.laterWall === undefined ? undefined : this.laterWall / steps.length) : first.wall;
    return profileOf(totals, steps, warmupLeftOut, peaks, wall);
  }
}

function profileOf(totals: readonly DeviceTotals[], steps: readonly number[], warmupLeftOut: boolean, peaks: Peaks, wallSeconds: number | undefined): RunProfile {
  const per = steps.length * totals.length; // step-device pairs: every figure is per step and device
  type Acc = { op: string; stream: StreamName; calls: number; seconds: number; flops: number; priced: boolean; bytes: number };
  const rows = new Map<string, Acc>();
  const phases = new Map<string, { phase: string; stream: StreamName; seconds: number; calls: number; flops: number }>();
  const work = new Map<DeviceProgram, InstructionWork[]>();
  for (const t of totals) {
    const list = work.get(t.program) ?? t.program.instructions.map((ins) => instructionWork(t.program, ins));
    work.set(t.program, list);
    t.program.instructions.forEach((ins, k) => {
      const stream: StreamName = ins.stream === COMM ? "communication" : "compute";
      const key = `${stream}\0${ins.op}`;
      let acc = rows.get(key);
      if (!acc) rows.set(key, (acc = { op: ins.op, stream, calls: 0, seconds: 0, flops: 0, priced: true, bytes: 0 }));
      const w = list[k]!;
      acc.calls += steps.length;
      acc.seconds += t.seconds[k]!;
      acc.bytes += steps.length * w.bytes;
      if (w.flops === undefined) acc.priced = false;
      else acc.flops += steps.length * w.flops;
      const phase = phaseOf(ins.action);
      const pkey = `${stream}\0${phase}`;
      let ph = phases.get(pkey);
      if (!ph) phases.set(pkey, (ph = { phase, stream, seconds: 0, calls: 0, flops: 0 }));
      ph.seconds += t.seconds[k]!;
      ph.calls += steps.length;
      ph.flops += steps.length * (w.flops ?? 0);
    });
  }
  const span = totals.reduce((s, t) => s + t.span, 0) / per;
  const share = (seconds: number): number => (span > 0 ? seconds / span : 0);
  const kernels = [...rows.values()]
    .map((r): KernelProfile => {
      const seconds = r.seconds / per;
      const bytes = r.bytes / per;
      const flops = r.priced ? r.flops / per : undefined;
      const rate = (x: number): number => (seconds > 0 ? x / seconds : 0);
      const ideal = Math.max(flops === undefined ? 0 : flops / peaks.flopsPerSecond, bytes / peaks.bytesPerSecond);
      return {
        op: r.op,
        stream: r.stream,
        callsPerStep: r.calls / per,
        secondsPerStep: seconds,
        ...(flops !== undefined && { flopsPerStep: flops }),
        bytesPerStep: bytes,
        shareOfStep: share(seconds),
        ...(flops !== undefined && { flopsPerSecond: rate(flops), fractionOfPeakFlops: rate(flops) / peaks.flopsPerSecond }),
        bytesPerSecond: rate(bytes),
        fractionOfPeakBandwidth: rate(bytes) / peaks.bytesPerSecond,
        rooflineFraction: seconds > 0 ? ideal / seconds : 0,
      };
    })
    .sort((a, b) => b.secondsPerStep - a.secondsPerStep || (a.op < b.op ? -1 : 1));
  const stream = (name: StreamName): StreamProfile => {
    const mine = kernels.filter((k) => k.stream === name);
    const busySeconds = mine.reduce((s, k) => s + k.secondsPerStep, 0);
    return { busySeconds, callsPerStep: mine.reduce((s, k) => s + k.callsPerStep, 0), shareOfStep: share(busySeconds) };
  };
  return {
    steps,
    warmupLeftOut,
    devices: totals.map((t) => t.rank),
    aggregation: "mean per device",
    peaks,
    spanSeconds: span,
    ...(wallSeconds !== undefined && { wallSeconds }),
    streams: { compute: stream("compute"), communication: stream("communication") },
    kernels,
    phases: [...phases.values()]
      .map((x): PhaseProfile => ({ phase: x.phase, stream: x.stream, secondsPerStep: x.seconds / per, callsPerStep: x.calls / per, flopsPerStep: x.flops / per }))
      .sort((a, b) => b.secondsPerStep - a.secondsPerStep || (a.phase < b.phase ? -1 : 1)),
  };
}

// --- Text --------------------------------------------------------------------------------------------------

const ms = (s: number): string => (s * 1e3).toFixed(3);
const pct = (f: number | undefined): string => (f === undefined ? "—" : `${(100 * f).toFixed(f < 0.1 ? 1 : 0)}%`);
const rate = (x: number | undefined): string => (x === undefined ? "—" : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const calls = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(1));

function stepsText(steps: readonly number[]): string {
  if (steps.length === 1) return `step ${steps[0]}`;
  const contiguous = steps.every((s, i) => i === 0 || s === steps[i - 1]! + 1);
  return contiguous ? `steps ${steps[0]}–${steps[steps.length - 1]}` : `${steps.length} steps`;
}

/** The profile as text: how it was taken, the peaks, the streams' busy time, then per stream its `top`
 *  longest kernels and the rest as one line. */
export function formatProfile(p: RunProfile, top = 15): string {
  const out: string[] = [];
  const devices = p.devices.length === 1 ? `device ${p.devices[0]}` : `the mean of devices ${p.devices.join(", ")}`;
  const warm = p.warmupLeftOut ? ", the warm-up step left out" : " (the only step: warm-up included)";
  out.push(`profile: ${stepsText(p.steps)}${warm}; per step, ${devices}`);
  out.push(`peaks per device: sgemm ${(p.peaks.flopsPerSecond / 1e9).toFixed(1)} GFLOP/s, memory ${(p.peaks.bytesPerSecond / 1e9).toFixed(1)} GB/s (${p.peaks.method})`);
  const wall = p.wallSeconds === undefined ? "" : `step ${ms(p.wallSeconds)} ms wall time; `;
  const { compute, communication } = p.streams;
  out.push(
    `${wall}traced span ${ms(p.spanSeconds)} ms (first instruction's start to last one's end); compute stream busy ${ms(compute.busySeconds)} ms (${pct(compute.shareOfStep)} of the span), ` +
      `communication stream busy ${ms(communication.busySeconds)} ms (${pct(communication.shareOfStep)})`,
  );
  for (const stream of ["compute", "communication"] as const) {
    const mine = p.phases.filter((x) => x.stream === stream);
    if (mine.length === 0) continue;
    const forward = mine.find((x) => x.phase === "forward");
    const text = mine.map((x) => {
      const compared = forward && forward.secondsPerStep > 0 && forward.flopsPerStep > 0 && (x.phase === "backward" || x.phase === "recompute");
      const ratio = compared ? ` (${(x.secondsPerStep / forward.secondsPerStep).toFixed(2)}× forward's time, ${(x.flopsPerStep / forward.flopsPerStep).toFixed(2)}× its FLOPs)` : "";
      return `${x.phase} ${ms(x.secondsPerStep)} ms${ratio}`;
    });
    out.push(`${stream} stream by phase: ${text.join(", ")}`);
  }
  const header = ["kernel", "calls", "ms/step", "%step", "GFLOP/s", "%peak", "GB/s", "%peak", "%roof"];
  for (const stream of ["compute", "communication"] as const) {
    const mine = p.kernels.filter((k) => k.stream === stream);
    if (mine.length === 0) continue;
    const table: string[][] = [[`${stream} stream`, ...header.slice(1)]];
    for (const k of mine.slice(0, top)) {
      table.push([
        `  ${k.op}`,
        calls(k.callsPerStep),
        ms(k.secondsPerStep),
        pct(k.shareOfStep),
        rate(k.flopsPerSecond === undefined ? undefined : k.flopsPerSecond / 1e9),
        pct(k.fractionOfPeakFlops),
        rate(k.bytesPerSecond / 1e9),
        pct(k.fractionOfPeakBandwidth),
        pct(k.rooflineFraction),
      ]);
    }
    const rest = mine.slice(top);
    if (rest.length > 0) {
      const seconds = rest.reduce((s, k) => s + k.secondsPerStep, 0);
      table.push([`  other (${rest.length} kernels)`, calls(rest.reduce((s, k) => s + k.callsPerStep, 0)), ms(seconds), pct(p.spanSeconds > 0 ? seconds / p.spanSeconds : 0), "", "", "", "", ""]);
    }
    const s = p.streams[stream];
    table.push(["  total", calls(s.callsPerStep), ms(s.busySeconds), pct(s.shareOfStep), "", "", "", "", ""]);
    const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table) out.push(r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ").trimEnd());
  }
  out.push("FLOPs: the op registry's cost rules at each instruction's shapes (— : bytes only); bytes: operands read once, outputs written once; %roof: the time at the peaks over the time taken");
  if (p.streams.communication.callsPerStep > 0) out.push("communication times include waiting for the peers");
  return out.join("\n") + "\n";
}
