// What every engine of `fsm run` offers (engines.ts picks one): a step on a batch, parameters read back,
// a trace when asked and the memory it holds.
import type { Batch } from "../interp/session.js";
import type { DeviceProgram } from "./device-program.js";
import type { TraceEvent } from "./trace.js";

export class EngineError extends Error {}

export interface StepEngine {
  /** One training step on the batch; resolves with the mean loss of its micro-batches. */
  step(batch: Batch): Promise<number>;
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
  readonly checkpoint?: { save(dir: string, step: number): string; load(dir: string): number };
  /** The current value of a parameter (for tests and checkpoints). */
  param(name: string): Float32Array;
  /** Bytes the engine holds for a step, all devices together (the native arenas). */
  readonly memoryBytes?: number;
  /** Per device: the bytes of its arena (the native engine, whose devices each have one). */
  readonly deviceMemoryBytes?: readonly number[];
}

