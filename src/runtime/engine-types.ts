// What every engine of `fsm run` offers (engines.ts picks one): a step on a batch, parameters read back,
// a trace when asked and the memory it holds.
import type { Batch } from "../interp/session.js";
import type { DeviceProgram } from "../lower/device-program.js";
import type { TraceEvent } from "./trace.js";

/** What failed, as data (the native executor's structured failure with its instruction mapped to the plan's
 *  action): what `fsm run --json` reports and tests assert, so nobody parses the message. */
export interface RunFailure {
  /** kernel / comm: an instruction of that kind threw; timeout: a device waited for peers longer than the
   *  timeout; hang: a device stopped responding and nothing waited on it; nan: a loss was not finite; oom: an
   *  arena larger than the device's memory, or one the machine could not allocate. */
  readonly kind: "kernel" | "comm" | "timeout" | "hang" | "aborted" | "nan" | "oom";
  /** The training step (1-based, over the whole run) it happened in; absent before the first step. */
  readonly step?: number;
  /** The device (global rank) where it happened. */
  readonly device?: number;
  /** The plan action and the op of the instruction that failed. */
  readonly action?: string;
  readonly op?: string;
  /** A timeout's ranks that never arrived. */
  readonly peers?: readonly number[];
  /** Devices that were busy in a kernel all along while their peers timed out (the likelier cause). */
  readonly busy?: readonly { readonly device: number; readonly action: string; readonly op: string; readonly seconds: number }[];
  /** nan: the micro-batch whose loss was not finite. */
  readonly microBatch?: number;
  /** oom: the arena, and the device's memory when that was the limit. */
  readonly arenaBytes?: number;
  readonly limitBytes?: number;
  /** The root cause alone, without where it happened. */
  readonly message: string;
}

export class EngineError extends Error {
  constructor(
    message: string,
    readonly failure?: RunFailure,
  ) {
    super(message);
  }
}

export const FAULT_KINDS = ["kernel", "comm", "nan", "oom", "hang"] as const;

/** A failure caused on purpose to test failure handling (`fsm run --inject-fault`; the native engine only). */
export interface InjectedFault {
  /** kernel / comm: an instruction of the device's compute / communication stream fails; nan: a value of its
   *  forward becomes NaN; oom: its memory limit is set below its arena, so it is refused at startup; hang: it
   *  stops responding mid-step (its peers' communicator timeout names it). */
  readonly kind: (typeof FAULT_KINDS)[number];
  readonly device: number;
  /** The step of this run it strikes (1 = the first; oom strikes before any). */
  readonly step: number;
}

/** Where a resumed run starts: the step (= data position) and, when resharded, the saving plan's devices. */
export interface Resumed {
  readonly step: number;
  readonly devices: number;
  readonly resharded: boolean;
  /** Rank files read without checksums (an fsm before them wrote the checkpoint): worth a warning. */
  readonly unverified: readonly string[];
}

export interface StepEngine {
  /** One training step on the batch; resolves with the mean loss of its micro-batches. `blocking` (where
   *  canBlock): the devices run on the calling thread, done when step() returns (src/runtime/step-mode.ts). */
  step(batch: Batch, blocking?: boolean): Promise<number>;
  /** Whether step() can block (the native engine). */
  readonly canBlock?: boolean;
  /** Trace events of the steps run so far, when the engine records them (the native engine, asked to). */
  trace?(): TraceEvent[];
  /** Per device: its program and the per-instruction [start, end] timings (seconds, one origin for all
   *  devices) of the last traced step (the native engine with a trace; empty arrays before one). */
  lastTimings?(): { program: DeviceProgram; timings: Float64Array }[];
  /** fp16 loss scaling: whether the last step was skipped (its gradients overflowed) and the scale it
   *  ran with. */
  lastStep?(): { readonly skipped: boolean; readonly lossScale: number };
  /** Checkpoints (the native engine): save after `step` completed steps; load returns the steps the
   *  checkpoint had completed (the data position to continue from). */
  readonly checkpoint?: { save(dir: string, step: number): Promise<string>; load(dir: string): Resumed };
  /** The rows of the global batch step() reads (a process's share under mpirun; absent: all of them). */
  readonly rows?: { readonly from: number; readonly count: number };
  /** Payload bytes this process's devices have sent so far, within the process and to other processes (the
   *  native engine under mpirun; zeros when the communicator does not count). */
  bytesSent?(): { readonly inProcess: number; readonly betweenProcesses: number };
  /** When the trace's time 0 was, in ms since the epoch (to merge the traces of several processes). */
  readonly traceOrigin?: number;
  /** The current value of a parameter (for tests and checkpoints). */
  param(name: string): Float32Array;
  /** Bytes the engine holds for a step, all devices together (the native arenas). */
  readonly memoryBytes?: number;
  /** Per device: the bytes of its arena (the native engine, whose devices each have one). */
  readonly deviceMemoryBytes?: readonly number[];
}

