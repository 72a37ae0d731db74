// The settings a compile may derive instead of search, in one place: the planner's search (the next issue)
// replaces this file. Everything else left `auto` is an error naming the setting (see resolve.ts).
import type { CheckpointMode, ParallelConfig, ScheduleKind, ShardStrategy } from "../check/settings-types.js";
import { CompileError } from "./errors.js";

export interface MeshSizes {
  readonly devices: number | undefined;
  readonly stages: number | undefined;
  readonly dataParallel: number | undefined;
}

/**
 * devices = stages × data_parallel: any one of the three follows from the other two, and stages alone means
 * data_parallel = 1. Returns the three, with undefined where they cannot be derived (resolve.ts names the
 * missing setting).
 */
export function deriveMesh(known: MeshSizes): MeshSizes {
  const { devices, stages, dataParallel } = known;
  if (devices !== undefined && stages !== undefined && dataParallel !== undefined) {
    if (stages * dataParallel !== devices) {
      throw new CompileError(`devices = ${devices} but stages × data_parallel = ${stages} × ${dataParallel} = ${stages * dataParallel}`);
    }
    return known;
  }
  if (stages !== undefined && dataParallel !== undefined) return { devices: stages * dataParallel, stages, dataParallel };
  if (devices !== undefined && stages !== undefined) {
    if (devices % stages !== 0) throw new CompileError(`devices = ${devices} is not a multiple of stages = ${stages}`);
    return { devices, stages, dataParallel: devices / stages };
  }
  if (devices !== undefined && dataParallel !== undefined) {
    if (devices % dataParallel !== 0) throw new CompileError(`devices = ${devices} is not a multiple of data_parallel = ${dataParallel}`);
    return { devices, stages: devices / dataParallel, dataParallel };
  }
  // Only the stage count is known: one pipeline, no data parallelism (FairScale's Pipe on `stages` devices).
  if (stages !== undefined && devices === undefined && dataParallel === undefined) return { devices: stages, stages, dataParallel: 1 };
  return known;
}

/** schedule auto → 1f1b: GPipe's bubble with 1/m of its activation memory, and no constraint on m. */
export function deriveSchedule(p: ParallelConfig): ScheduleKind {
  return p.schedule === "auto" ? "1f1b" : p.schedule;
}

/** virtual_stages auto → 2 for the interleaved schedule (its smallest interleaving), else 1. */
export function deriveVirtualStages(p: ParallelConfig, schedule: ScheduleKind): number {
  if (p.virtualStages !== "auto") return p.virtualStages;
  return schedule === "interleaved" ? 2 : 1;
}

/** chunks auto → one micro-batch per pipeline rank: the fewest that keep every rank busy in steady state
 *  (and a multiple of the ranks, as the interleaved schedule needs). */
export function deriveChunks(p: ParallelConfig, stages: number): number {
  return p.chunks === "auto" ? stages : p.chunks;
}

/** checkpoint auto → never: no recompute unless asked (layers marked @checkpoint are still recomputed). */
export function deriveCheckpoint(p: ParallelConfig): CheckpointMode {
  return p.checkpoint === "auto" ? "never" : p.checkpoint;
}

/** shard auto → none when there is nothing to shard over (data_parallel = 1); otherwise a real choice for
 *  the planner's search (undefined). */
export function deriveShard(p: ParallelConfig, dataParallel: number): ShardStrategy | undefined {
  if (p.shard !== "auto") return p.shard;
  return dataParallel === 1 ? "none" : undefined;
}

/** reshard_after_forward auto → true, FairScale's default. */
export function deriveReshard(p: ParallelConfig): boolean {
  return p.reshardAfterForward === "auto" ? true : p.reshardAfterForward;
}
