// Reading a measured trace for `fsm viz --trace`: Chrome trace JSON as `fsm run --trace` writes it (complete
// "X" events, pid = device, tid 0 compute / 1 communication, ts and dur in µs, args.step), validated with
// clear messages, checked against the plan's devices, and cut down to one step.
import { TAIL_PID } from "../plan/trace-format.js";
import { rankText } from "./format.js";

/** A trace that cannot be drawn for this plan: the CLI reports the message and exits 1. */
export class TraceError extends Error {}

export interface TraceSpan {
  readonly name: string;
  readonly device: number;
  readonly stream: "compute" | "comm";
  /** Seconds from the start of the chosen step. */
  readonly start: number;
  readonly end: number;
  /** What the runtime recorded besides the step (kernels run), for hover details. */
  readonly note: string;
}

export interface MeasuredStep {
  readonly step: number;
  readonly steps: readonly number[];
  readonly stepSeconds: number;
  readonly spans: readonly TraceSpan[];
}

interface RawEvent {
  readonly name: string;
  readonly pid: number;
  readonly tid: number;
  readonly ts: number;
  readonly dur: number;
  readonly step: number;
  readonly note: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const isTime = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** The complete events of a Chrome trace (`{"traceEvents": [...]}` or a bare array). Metadata and other
 *  phases are skipped, and so is the fused engine's step process (TAIL_PID), which is no device. */
export function parseTrace(text: string): RawEvent[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new TraceError(`not a Chrome trace: not valid JSON (${(e as Error).message})`);
  }
  const list = Array.isArray(value) ? value : isObject(value) ? value["traceEvents"] : undefined;
  if (!Array.isArray(list)) throw new TraceError(`not a Chrome trace: expected {"traceEvents": [...]} or an array of events`);
  const out: RawEvent[] = [];
  list.forEach((e: unknown, i) => {
    const where = `traceEvents[${i}]`;
    if (!isObject(e) || typeof e["ph"] !== "string") throw new TraceError(`not a Chrome trace: ${where} is not an event with a "ph" phase`);
    if (e["ph"] !== "X") return;
    const { name, pid, tid, ts, dur } = e;
    if (typeof name !== "string") throw new TraceError(`${where}: "name" must be a string`);
    if (!isInt(pid)) throw new TraceError(`${where} (${name}): "pid" must be a device number, got ${JSON.stringify(pid)}`);
    if (pid === TAIL_PID) return;
    if (tid !== 0 && tid !== 1) throw new TraceError(`${where} (${name}): "tid" must be 0 (compute) or 1 (communication), got ${JSON.stringify(tid)}`);
    if (!isTime(ts) || !isTime(dur) || dur < 0) throw new TraceError(`${where} (${name}): "ts" and "dur" must be numbers (µs), "dur" not negative`);
    const args = isObject(e["args"]) ? e["args"] : {};
    const step = args["step"] ?? 1;
    if (!isInt(step)) throw new TraceError(`${where} (${name}): args.step must be a step number, got ${JSON.stringify(step)}`);
    const note = typeof args["kernels"] === "string" && args["kernels"] !== "" ? `; kernels: ${args["kernels"]}` : "";
    out.push({ name, pid, tid, ts, dur, step, note });
  });
  if (out.length === 0) throw new TraceError(`the trace has no complete ("ph": "X") device events: nothing was measured`);
  return out;
}

/**
 * The events of one step, timed from that step's first event. Its devices must be the plan's (0..devices-1,
 * every one present); by default the last step every device has events in.
 */
export function measuredStep(events: readonly RawEvent[], devices: number, step?: number): MeasuredStep {
  const seen = [...new Set(events.map((e) => e.pid))].sort((a, b) => a - b);
  if (seen.length !== devices || seen[seen.length - 1] !== devices - 1) {
    throw new TraceError(
      `the trace's devices (${rankText(seen)}) are not the plan's ${devices} (${rankText([...Array(devices).keys()])}): was it recorded from another plan?`,
    );
  }
  // The devices of every step, from one pass over the events.
  const devicesOf = new Map<number, Set<number>>();
  for (const e of events) {
    let d = devicesOf.get(e.step);
    if (!d) devicesOf.set(e.step, (d = new Set()));
    d.add(e.pid);
  }
  const steps = [...devicesOf.keys()].sort((a, b) => a - b);
  let chosen: number;
  if (step !== undefined) {
    if (!devicesOf.has(step)) throw new TraceError(`the trace has no step ${step} (it has steps ${rankText(steps)})`);
    chosen = step;
  } else {
    const complete = steps.filter((s) => devicesOf.get(s)!.size === devices);
    if (complete.length === 0) throw new TraceError(`no step of the trace has events from every device`);
    chosen = complete[complete.length - 1]!;
  }
  const mine = events.filter((e) => e.step === chosen);
  // Loops, not Math.min(...): a long trace has more events than a call has room for arguments.
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const e of mine) {
    t0 = Math.min(t0, e.ts);
    t1 = Math.max(t1, e.ts + e.dur);
  }
  const spans = mine.map((e) => ({
    name: e.name,
    device: e.pid,
    stream: e.tid === 0 ? ("compute" as const) : ("comm" as const),
    start: (e.ts - t0) / 1e6,
    end: (e.ts + e.dur - t0) / 1e6,
    note: e.note,
  }));
  return { step: chosen, steps, stepSeconds: (t1 - t0) / 1e6, spans };
}
