// Gradient clipping's one collective: the global norm needs every gradient of the model, so where no device
// holds them all (pipeline stages, sharded gradients, tensor-parallel slices) the squared norms are
// all-reduced over every device once per step, before any optimizer step. Compile places it
// (compile/optimizer-step.ts); the plan search prices the same seconds (search/step-model.ts).
import type { ShardStrategy } from "../check/settings-types.js";
import { meshRank } from "../plan/plan.js";
import type { Cluster } from "./cluster.js";
import { collectiveTime, groupLink } from "./collectives.js";

/** fp32 sum of squares, one per rank. */
export const NORM_BYTES = 4;

/** Whether clipping needs a norm all-reduce: always across pipeline stages; within one stage only when the
 *  gradients are sharded (with none and oss every replica holds the whole reduced gradient). */
export function needsNormAllReduce(s: { readonly clipGradNorm: number | undefined; readonly devices: number; readonly stages: number; readonly shard: ShardStrategy; readonly tensorParallel: number }): boolean {
  if (s.clipGradNorm === undefined || s.devices === 1) return false;
  // A tensor-parallel rank holds only slices of its split parameters' gradients.
  return s.stages > 1 || s.shard === "sddp" || s.shard === "fsdp" || s.tensorParallel > 1;
}

/**
 * Seconds of the norm all-reduce, as two rings (within each stage's replicas, then along the pipeline): a
 * 4-byte reduction is all latency, and one flat ring over every device would pay 2(n−1) steps of it.
 */
export function normSeconds(cluster: Cluster, s: { readonly dataParallel: number; readonly stages: number; readonly tensorParallel: number }): number {
  const replicas = Array.from({ length: s.dataParallel }, (_, r) => meshRank(s, 0, r));
  const pipe = Array.from({ length: s.stages }, (_, p) => meshRank(s, p, 0));
  return (
    collectiveTime("all_reduce", NORM_BYTES, s.dataParallel, groupLink(cluster, replicas)) +
    collectiveTime("all_reduce", NORM_BYTES, s.stages, groupLink(cluster, pipe))
  );
}
