// Chrome trace JSON (opens in Perfetto / chrome://tracing) of native-engine steps: one process per device
// with its compute track, consecutive instructions of one plan action merged into one event, and a "step"
// process for the gradient averaging, optimizer and updates the program runs once for all devices.
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

/** Process and thread names for the devices that appear. */
export function traceMetadata(devices: number): TraceEvent[] {
  const out: TraceEvent[] = [];
  for (let r = 0; r < devices; r++) {
    out.push({ name: "process_name", ph: "M", pid: r, tid: 0, args: { name: `device ${r}` } });
    out.push({ name: "thread_name", ph: "M", pid: r, tid: 0, args: { name: "compute" } });
  }
  out.push({ name: "process_name", ph: "M", pid: TAIL_PID, tid: 0, args: { name: "step: gradient averaging, optimizer, updates" } });
  return out;
}
