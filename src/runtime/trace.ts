// Chrome trace JSON (opens in Perfetto / chrome://tracing) of native-engine steps: one process per device
// with a compute and a communication track; consecutive instructions of one plan action on one track merged
// into one event.
import type { DeviceProgram } from "../lower/device-program.js";

export interface TraceEvent {
  readonly name: string;
  readonly ph: "X" | "M";
  readonly pid: number;
  readonly tid: number;
  readonly ts?: number;
  readonly dur?: number;
  readonly args?: Readonly<Record<string, string | number>>;
}

/** The process of the step's tail in traces of earlier fsm versions (their single-program engine); no device. */
export { TAIL_PID } from "../plan/trace-format.js";

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

/** Process and thread names of the devices (by global rank): each a compute (tid 0) and a communication
 *  (tid 1) track. */
export function traceMetadata(ranks: readonly number[]): TraceEvent[] {
  const out: TraceEvent[] = [];
  for (const r of ranks) {
    out.push({ name: "process_name", ph: "M", pid: r, tid: 0, args: { name: `device ${r}` } });
    out.push({ name: "thread_name", ph: "M", pid: r, tid: 0, args: { name: "compute" } });
    out.push({ name: "thread_name", ph: "M", pid: r, tid: 1, args: { name: "communication" } });
  }
  return out;
}
