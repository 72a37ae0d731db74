// Discrete-event simulation of a lowered schedule under given costs: step time, bubble, exposed comm, memory.
import { formatAction, isCollectiveKind, isComputeKind } from "./action.js";
import { computeSeconds, type ScheduleCosts } from "./costs.js";
import { execute, type Execution } from "./execute.js";
import type { LoweredAction, LoweredSchedule } from "./lowered.js";
import { activationMemory, type MemoryPoint } from "./memory.js";

export interface RankReport {
  /** Compute-stream busy seconds. */
  readonly busy: number;
  /** Compute-stream idle seconds within the step. */
  readonly idle: number;
  /** Comm-stream busy seconds (transfers and collectives). */
  readonly commBusy: number;
  /** Held bytes: activations plus gathered FSDP units (memory.ts). */
  readonly peakBytes: number;
  readonly memory: readonly MemoryPoint[];
}

export interface SimulationReport {
  /** Time from the first action's start to the last action's end. */
  readonly stepTime: number;
  /** Idle compute-stream time over all ranks ÷ (ranks × step time). */
  readonly bubbleFraction: number;
  /**
   * Communication on the critical path: step time minus the step time of the same schedule with every
   * comm-stream action (transfers and collectives) free. What overlaps compute costs nothing here; the rest
   * is what communication adds. Free collectives still synchronise their group: waiting for a slower
   * member is the schedule's, not communication's.
   */
  readonly exposedCommTime: number;
  readonly perRank: readonly RankReport[];
  /** Per stage: most micro-batches whose forward has started and whose B (or I) has not finished. */
  readonly peakInFlight: readonly number[];
  /** Per stage: most micro-batches waiting for their W after I (0 without split backwards). */
  readonly peakAwaitingW: readonly number[];
  /** Start and end of every action by id. */
  readonly run: Execution;
}

/**
 * Seconds an action occupies its stream; for a SEND/RECV pair it is called with the SEND, for a group
 * collective with each member (the engine takes the longest). A FREE takes no time.
 */
export function actionSeconds(costs: ScheduleCosts, a: LoweredAction): number {
  const { kind, stage } = a.action;
  let t: number;
  if (isComputeKind(kind)) t = computeSeconds(costs, a.action);
  else if (kind === "SEND_F" || kind === "SEND_B") {
    t = costs.transfer(a.rank, a.action.peer!, costs.boundaryBytes(stage, a.action.mb!, kind === "SEND_F" ? "forward" : "backward"));
  } else if (isCollectiveKind(kind)) {
    if (!costs.collective) throw new Error(`simulate: ${where(a)} is a collective, and these costs have no collective()`);
    t = costs.collective(kind, a.bytes ?? 0, a.groupSize ?? a.group?.length ?? 1, stage);
  } else if (kind === "OPTIMIZER") {
    if (!costs.optimizer) throw new Error(`simulate: ${where(a)} is an optimizer step, and these costs have no optimizer()`);
    t = costs.optimizer(stage, a.action.unit);
  } else if (kind === "FREE") t = 0;
  else throw new Error(`simulate: ${where(a)} has no cost (a RECV takes its SEND's time)`);
  if (!(Number.isFinite(t) && t >= 0)) throw new Error(`simulate: cost of ${where(a)} is ${t}, not a duration`);
  return t;
}

function where(a: LoweredAction): string {
  return `${formatAction(a.action)} on rank ${a.rank}`;
}

/** Simulates a validated schedule; throws if it does not run to completion (validate() explains why). */
export function simulate(s: LoweredSchedule, costs: ScheduleCosts): SimulationReport {
  const run = execute(s, (a) => actionSeconds(costs, a));
  if (!run.complete) throw new Error(`simulate: schedule ${s.name} deadlocks; validate() shows where`);
  const stepTime = run.makespan;
  const free = execute(s, (a) => (a.stream === "comm" ? 0 : actionSeconds(costs, a)));
  const memory = activationMemory(s, run, costs);
  const busyOf = (ids: readonly number[]): number => ids.reduce((sum, id) => sum + (run.end[id]! - run.start[id]!), 0);
  const perRank = s.streams.map((st, rank): RankReport => {
    const busy = busyOf(st.compute);
    const mem = memory.perRank[rank]!;
    return { busy, idle: stepTime - busy, commBusy: busyOf(st.comm), peakBytes: mem.peakBytes, memory: mem.timeline };
  });
  const idle = perRank.reduce((sum, r) => sum + r.idle, 0);
  return {
    stepTime,
    bubbleFraction: stepTime > 0 ? idle / (s.ranks * stepTime) : 0,
    exposedCommTime: stepTime - free.makespan,
    perRank,
    peakInFlight: memory.peakInFlight,
    peakAwaitingW: memory.peakAwaitingW,
    run,
  };
}
