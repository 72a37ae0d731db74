// Chrome trace JSON (opens in Perfetto / chrome://tracing) of native-engine steps: one process per device
// with a compute and a communication track (the fused engine: a compute track only, and a "step" process
// for the gradient averaging, optimizer and updates it runs once for all devices); consecutive
// instructions of one plan action on one track merged into one event.
import type { DeviceProgram } from "./device-program.js";
import type { StepProgram } from "./step-program.js";

export interface TraceEvent {
  readonly name: string;
  readonly ph: "X" | "M";
  readonly pid: number;
  readonly tid: number;
  readonly ts?: number;
  readonly dur?: number;
  readonly args?: Readonly<Record<string, string | number>>;
}

/** The trace's process for the step's tail (ranks are 0..devices-1). */
export const TAIL_PID = 1_000_000;

/** Events of one step whose instruction timings (seconds from the step's start) began at `startUs`. */
export function stepEvents(program: StepProgram, timings: Float64Array, startUs: number, step: number): TraceEvent[] {
  const out: TraceEvent[] = [];
  let i = 0;
  const list = program.instructions;
  while (i < list.length) {
    const tag = list[i]!.tag;
    let j = i;
    const ops: string[] = [];
    while (j < list.length && list[j]!.tag.rank === tag.rank && list[j]!.tag.action === tag.action) ops.push(list[j++]!.op);
    const start = timings[2 * i]!;
    const end = timings[2 * (j - 1) + 1]!;
    out.push({
      name: tag.action,
      ph: "X",
      pid: tag.rank ?? TAIL_PID,
      tid: 0,
      ts: startUs + start * 1e6,
      dur: (end - start) * 1e6,
      args: { step, ops: ops.length, kernels: [...new Set(ops)].join(" ") },
    });
    i = j;
  }
  return out;
}

/** One device's events of a cluster step: per stream (tid 0 compute, 1 communication), runs of consecutive
 *  instructions of one action. */
export function deviceEvents(device: number, program: DeviceProgram, timings: Float64Array, startUs: number, step: number): TraceEvent[] {
  const out: TraceEvent[] = [];
  for (const stream of [0, 1] as const) {
    const list = program.instructions.flatMap((ins, i) => (ins.stream === stream ? [i] : []));
    let a = 0;
    while (a < list.length) {
      const action = program.instructions[list[a]!]!.action;
      let z = a;
      const ops: string[] = [];
      while (z < list.length && program.instructions[list[z]!]!.action === action) ops.push(program.instructions[list[z++]!]!.op);
      const start = timings[2 * list[a]!]!;
      const end = timings[2 * list[z - 1]! + 1]!;
      out.push({ name: action, ph: "X", pid: device, tid: stream, ts: startUs + start * 1e6, dur: (end - start) * 1e6, args: { step, ops: ops.length, kernels: [...new Set(ops)].join(" ") } });
      a = z;
    }
  }
  return out;
}

/** Process and thread names for the devices that appear (`tail`: the fused engine's step process). */
export function traceMetadata(devices: number, tail = true): TraceEvent[] {
  const out: TraceEvent[] = [];
  for (let r = 0; r < devices; r++) {
    out.push({ name: "process_name", ph: "M", pid: r, tid: 0, args: { name: `device ${r}` } });
    out.push({ name: "thread_name", ph: "M", pid: r, tid: 0, args: { name: "compute" } });
    if (!tail) out.push({ name: "thread_name", ph: "M", pid: r, tid: 1, args: { name: "communication" } });
  }
  if (tail) out.push({ name: "process_name", ph: "M", pid: TAIL_PID, tid: 0, args: { name: "step: gradient averaging, optimizer, updates" } });
  return out;
}
