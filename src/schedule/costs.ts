// The abstract costs a schedule simulation needs; the cost model implements it, tests use uniformCosts.
import { formatAction, type Action, type CollectiveActionKind } from "./action.js";

/** Seconds for time, bytes for memory; stage is the (virtual) stage, mb the micro-batch. */
export interface ScheduleCosts {
  forward(stage: number, mb: number): number;
  /** Full backward (B): input and weight gradients together. */
  backward(stage: number, mb: number): number;
  /** Input-gradient half (I) of a split backward. */
  backwardInput(stage: number, mb: number): number;
  /** Weight-gradient half (W) of a split backward. */
  backwardWeight(stage: number, mb: number): number;
  /** Recompute (R) of a checkpointed forward. */
  recompute(stage: number, mb: number): number;
  /** Bytes that cross the boundary out of `stage`: its output activation (forward) or input gradient (backward). */
  boundaryBytes(stage: number, mb: number, direction: "forward" | "backward"): number;
  /** Seconds to move `bytes` from one rank to another. */
  transfer(fromRank: number, toRank: number, bytes: number): number;
  /** Everything a forward stashes for its backward, the stage input included. */
  activationBytes(stage: number, mb: number): number;
  /** The stage input alone: all a checkpointed forward keeps until its recompute. */
  inputBytes(stage: number, mb: number): number;
  /** What W still needs once I has run (layer inputs and output gradients of the weighted ops). */
  weightGradBytes(stage: number, mb: number): number;
  // The two below are needed only by schedules with shard actions (simulate() says so when one meets
  // costs without them), so that cost models written for pure pipelines need not invent them.
  /**
   * Seconds of a collective of `stage` over a communicator of `groupSize` ranks (replicas outside the
   * simulation included), `bytes` the full buffer as src/cost/collectives.ts counts it.
   */
  collective?(kind: CollectiveActionKind, bytes: number, groupSize: number, stage: number): number;
  /** Seconds of the optimizer step of `stage` (of one unit or bucket when the plan splits it). */
  optimizer?(stage: number, unit?: number): number;
}

export interface UniformCostOptions {
  /** Forward seconds per stage and micro-batch. */
  readonly f: number;
  /** Full backward seconds; a split backward takes b − w for I and w for W. */
  readonly b: number;
  /** Weight-gradient seconds (default b / 2). */
  readonly w?: number;
  /** Recompute seconds (default f). */
  readonly r?: number;
  /** Seconds per transfer, whatever the bytes (default 0). */
  readonly comm?: number;
  /** Memory in any unit; by default one micro-batch's activations weigh 1, so memory counts micro-batches. */
  readonly activationBytes?: number;
  /** Default 0: checkpointed micro-batches are free until R unless given. */
  readonly inputBytes?: number;
  /** Default activationBytes / 2, an assumption for tests, not a measurement. */
  readonly weightGradBytes?: number;
  /** Seconds per collective whatever its kind and bytes (default 0); a communicator of one rank costs 0. */
  readonly collective?: number;
  /** Seconds per OPTIMIZER action (default 0). */
  readonly optimizer?: number;
}

/** Every stage and micro-batch alike: the setting of the closed-form bubble formulas. */
export function uniformCosts(o: UniformCostOptions): ScheduleCosts {
  const w = o.w ?? o.b / 2;
  const r = o.r ?? o.f;
  const comm = o.comm ?? 0;
  const act = o.activationBytes ?? 1;
  const input = o.inputBytes ?? 0;
  const wBytes = o.weightGradBytes ?? act / 2;
  const collective = o.collective ?? 0;
  const optimizer = o.optimizer ?? 0;
  for (const [name, v] of Object.entries({ f: o.f, b: o.b, w, r, comm, act, input, wBytes, collective, optimizer })) {
    if (!(Number.isFinite(v) && v >= 0)) throw new Error(`uniformCosts: ${name} must be a finite non-negative number, got ${v}`);
  }
  if (w > o.b) throw new Error(`uniformCosts: w (${w}) cannot exceed the full backward b (${o.b})`);
  if (input > act) throw new Error(`uniformCosts: inputBytes (${input}) cannot exceed activationBytes (${act})`);
  return {
    forward: () => o.f,
    backward: () => o.b,
    backwardInput: () => o.b - w,
    backwardWeight: () => w,
    recompute: () => r,
    boundaryBytes: () => 1,
    transfer: () => comm,
    activationBytes: () => act,
    inputBytes: () => input,
    weightGradBytes: () => wBytes,
    // As src/cost/collectives.ts: nobody to talk to, nothing to wait for.
    collective: (_kind, _bytes, groupSize) => (groupSize > 1 ? collective : 0),
    optimizer: () => optimizer,
  };
}

/** Seconds of a compute action (F, B, I, W, R) under `costs`. */
export function computeSeconds(costs: ScheduleCosts, a: Action): number {
  const mb = a.mb!;
  switch (a.kind) {
    case "F":
      return costs.forward(a.stage, mb);
    case "B":
      return costs.backward(a.stage, mb);
    case "I":
      return costs.backwardInput(a.stage, mb);
    case "W":
      return costs.backwardWeight(a.stage, mb);
    case "R":
      return costs.recompute(a.stage, mb);
    default:
      throw new Error(`computeSeconds: ${formatAction(a)} is not a compute action`);
  }
}
