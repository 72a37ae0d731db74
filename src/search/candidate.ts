// One point of the plan search's space, its text form for reports, and the --set arguments that reproduce it.
import type { ScheduleKind, ShardStrategy } from "../check/settings-types.js";

/** Checkpointing the search may choose: the three schedule-level modes, or `selective`: only the layers
 *  memory requires are recomputed (per stage, fewest recompute seconds), chosen by the search. */
export type SearchCheckpoint = "never" | "selective" | "except_last" | "always";

export interface Candidate {
  readonly stages: number;
  readonly dataParallel: number;
  /** Ranks of each tensor-parallel group (inside a node); 1: none. */
  readonly tensorParallel: number;
  readonly virtualStages: number;
  readonly microBatches: number;
  readonly schedule: ScheduleKind;
  readonly shard: ShardStrategy;
  readonly reshardAfterForward: boolean;
  /** FSDP: ranks of each shard group (hybrid sharding below dataParallel); dataParallel otherwise. */
  readonly shardGroup: number;
  /** FSDP: each unit reduce-scattered once per step, not after every micro-batch (no_sync). */
  readonly noSync: boolean;
  readonly checkpoint: SearchCheckpoint;
}

/** A candidate with its stage split and predicted numbers. */
export interface Evaluated {
  readonly candidate: Candidate;
  /** Layers per (virtual) stage. */
  readonly balance: readonly number[];
  /** Layers recomputed in the backward beyond @checkpoint (selective checkpointing), ascending. */
  readonly recomputeLayers: readonly number[];
  /** Closed-form step time (seconds), the quantity the search bounds and ranks by. */
  readonly estimate: number;
  /** The pipeline simulator's step time, for the candidates simulated. */
  readonly simulated?: number;
  /** Largest predicted per-device memory (bytes). */
  readonly memoryBytes: number;
  /** Bottleneck stage time of one micro-batch (seconds). */
  readonly bottleneck: number;
  /** Per pipeline rank: seconds of one micro-batch (its stages together), transfers included. */
  readonly stageSeconds: readonly number[];
}

/** The family a candidate belongs to: its mesh (`pp=4 dp=16`, `pp=8 dp=16 tp=8`). */
export function familyText(c: Candidate): string {
  return `pp=${c.stages} dp=${c.dataParallel}${c.tensorParallel > 1 ? ` tp=${c.tensorParallel}` : ""}`;
}

export function candidateText(c: Candidate): string {
  const parts = [`pp=${c.stages}`, `dp=${c.dataParallel}`, ...(c.tensorParallel > 1 ? [`tp=${c.tensorParallel}`] : []), `shard=${c.shard}`];
  if (c.shard === "fsdp") {
    // Hybrid sharding names its group; plain FSDP's is the data-parallel group, as before.
    if (c.shardGroup !== c.dataParallel) parts[parts.length - 1] += `(group ${c.shardGroup})`;
    parts.push(`reshard=${c.reshardAfterForward}`);
    if (c.noSync) parts.push("no_sync");
  }
  parts.push(`chunks=${c.microBatches}`, `schedule=${c.schedule}${c.virtualStages > 1 ? `(v=${c.virtualStages})` : ""}`, `checkpoint=${c.checkpoint}`);
  return parts.join(" ");
}

/** The --set arguments that reproduce a candidate without the search. */
export function candidateSets(e: Evaluated): string[] {
  const c = e.candidate;
  const out = [
    `parallel.data_parallel=${c.dataParallel}`,
    `parallel.chunks=${c.microBatches}`,
    `parallel.schedule=${c.schedule}`,
    `parallel.shard=${c.shard}`,
    `parallel.checkpoint=${c.checkpoint === "selective" ? "never" : c.checkpoint}`,
  ];
  if (c.virtualStages > 1) out.unshift(`parallel.stages=${c.stages}`, `parallel.virtual_stages=${c.virtualStages}`);
  else out.unshift(`parallel.balance=[${e.balance.join(",")}]`);
  // shard_group and no_sync given in full, so a file's own values (or `auto`) cannot change the plan.
  if (c.shard === "fsdp") out.push(`parallel.reshard_after_forward=${c.reshardAfterForward}`, `parallel.shard_group=${c.shardGroup}`, `parallel.no_sync=${c.noSync}`);
  if (c.tensorParallel > 1) out.push(`parallel.tensor_parallel=${c.tensorParallel}`);
  return out;
}
