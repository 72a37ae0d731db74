// Activation memory of a simulated schedule: bytes per rank over time, micro-batches in flight per stage.
import { freedGathers } from "./collectives.js";
import type { ScheduleCosts } from "./costs.js";
import type { Execution } from "./execute.js";
import type { LoweredSchedule } from "./lowered.js";

export interface MemoryPoint {
  readonly time: number;
  /** Bytes held from this time on: activations and gathered FSDP units. */
  readonly bytes: number;
}

export interface MemoryReport {
  /** Per rank: a step function of held activation bytes, and its peak. */
  readonly perRank: readonly { readonly timeline: readonly MemoryPoint[]; readonly peakBytes: number }[];
  /** Per stage: most micro-batches between the start of their F and the end of their B (or I). */
  readonly peakInFlight: readonly number[];
  /** Per stage: most micro-batches between the end of their I and the end of their W (split backward only). */
  readonly peakAwaitingW: readonly number[];
}

interface Event {
  readonly time: number;
  readonly rank: number;
  readonly stage: number;
  readonly bytes: number;
  readonly inFlight: number;
  readonly awaitingW: number;
}

/**
 * Convention (allocation at an action's start, release at its end, releases first at equal times):
 * F +activation (a checkpointed micro-batch, one with an R, keeps only +input); R +(activation − input);
 * B −activation; I −activation +weightGradBytes (what W still needs); W −weightGradBytes.
 * An ALL_GATHER +its bytes (the gathered unit) and the FREE that frees it −the same bytes: FSDP's unsharded
 * parameters, counted whole (the rank's own shard is model state, not counted here). A gather never freed
 * is held to the end. Transient working memory inside an action, other collectives' and p2p buffers, and
 * persistent model state (sharded parameters, gradients, optimizer state) are not counted.
 */
export function activationMemory(s: LoweredSchedule, run: Execution, costs: ScheduleCosts): MemoryReport {
  const key = (stage: number, mb: number): number => stage * s.microBatches + mb;
  const recomputed = new Set<number>();
  for (const a of s.actions) if (a.action.kind === "R") recomputed.add(key(a.action.stage, a.action.mb!));
  const events: Event[] = [];
  const push = (time: number, rank: number, stage: number, bytes: number, inFlight: number, awaitingW: number): void => {
    events.push({ time, rank, stage, bytes, inFlight, awaitingW });
  };
  for (const a of s.actions) {
    const { kind, stage, mb } = a.action;
    const t0 = run.start[a.id]!;
    const t1 = run.end[a.id]!;
    if (kind === "ALL_GATHER") push(t0, a.rank, stage, a.bytes ?? 0, 0, 0);
    else if (kind === "FREE") {
      const gather = freedGathers(s, a)[0];
      if (gather !== undefined) push(t1, a.rank, stage, -(s.actions[gather]!.bytes ?? 0), 0, 0);
    }
    if (mb === undefined) continue;
    const act = costs.activationBytes(stage, mb);
    switch (kind) {
      case "F":
        push(t0, a.rank, stage, recomputed.has(key(stage, mb)) ? costs.inputBytes(stage, mb) : act, 1, 0);
        break;
      case "R":
        push(t0, a.rank, stage, act - costs.inputBytes(stage, mb), 0, 0);
        break;
      case "B":
        push(t1, a.rank, stage, -act, -1, 0);
        break;
      case "I":
        push(t1, a.rank, stage, costs.weightGradBytes(stage, mb) - act, -1, 1);
        break;
      case "W":
        push(t1, a.rank, stage, -costs.weightGradBytes(stage, mb), 0, -1);
        break;
      default:
        break;
    }
  }
  // Releases first at equal times: an action that ends at t frees before one that starts at t allocates.
  events.sort((x, y) => x.time - y.time || releaseRank(x) - releaseRank(y));

  const held = new Float64Array(s.ranks);
  const perRank = Array.from({ length: s.ranks }, () => ({ timeline: [{ time: 0, bytes: 0 }] as MemoryPoint[], peakBytes: 0 }));
  const inFlight = new Int32Array(s.stages);
  const awaiting = new Int32Array(s.stages);
  const peakInFlight = new Array<number>(s.stages).fill(0);
  const peakAwaitingW = new Array<number>(s.stages).fill(0);
  for (const e of events) {
    held[e.rank]! += e.bytes;
    const r = perRank[e.rank]!;
    const last = r.timeline[r.timeline.length - 1]!;
    if (last.time === e.time) r.timeline[r.timeline.length - 1] = { time: e.time, bytes: held[e.rank]! };
    else r.timeline.push({ time: e.time, bytes: held[e.rank]! });
    r.peakBytes = Math.max(r.peakBytes, held[e.rank]!);
    inFlight[e.stage]! += e.inFlight;
    awaiting[e.stage]! += e.awaitingW;
    peakInFlight[e.stage] = Math.max(peakInFlight[e.stage]!, inFlight[e.stage]!);
    peakAwaitingW[e.stage] = Math.max(peakAwaitingW[e.stage]!, awaiting[e.stage]!);
  }
  return { perRank, peakInFlight, peakAwaitingW };
}

function releaseRank(e: Event): number {
  return e.bytes < 0 || e.inFlight < 0 || e.awaitingW < 0 ? 0 : 1;
}
