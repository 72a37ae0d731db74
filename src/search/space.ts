// The search space: every (tensor-parallel degree × pipeline depth × data-parallel degree × shard strategy ×
// micro-batch count × schedule × checkpointing, and for FSDP × shard group × no_sync) the cluster's devices and
// the batch allow, with the user's explicit settings as constraints. Tensor-parallel groups are consecutive ranks inside a node; pipeline
// ranks take contiguous blocks of data-parallel replicas (meshRank), so a data-parallel group fills a node
// before it spans nodes and pipeline stages run across nodes; the cost model prices whichever links each
// group ends up on.
import { SHARD_STRATEGIES, type ParallelConfig, type ScheduleKind, type ShardStrategy } from "../check/settings-types.js";
import type { Candidate, SearchCheckpoint } from "./candidate.js";

export interface SpaceInput {
  readonly devices: number;
  /** Tensor-parallel degrees to try (each divides the devices of a node and the model splits that way). */
  readonly tensorParallel: readonly number[];
  /** Devices of a node (the cluster profile's): hybrid shard groups stay inside one. */
  readonly devicesPerNode: number;
  readonly batch: number;
  readonly layers: number;
  readonly parallel: ParallelConfig;
}

export interface Space {
  readonly candidates: readonly Candidate[];
  /** Families the space leaves out and why (e.g. the batch does not split). */
  readonly excluded: readonly { readonly family: string; readonly reason: string }[];
}

const fixed = <T>(v: T | "auto"): T | undefined => (v === "auto" ? undefined : v);

function divisors(n: number): number[] {
  const out: number[] = [];
  for (let d = 1; d <= n; d++) if (n % d === 0) out.push(d);
  return out;
}

/**
 * FSDP shard groups searched for a stage of `dataParallel` replicas of `tensorParallel` ranks each: the whole
 * group (plain FSDP) and, when the group spans nodes, hybrid sharding over the largest group that fits in a
 * node (its gathers and reduce-scatters on intra-node links, one inter-node all-reduce of a 1/s gradient
 * shard per step). Smaller groups only add state memory for links that are no faster, so one is enough;
 * a group of one shards nothing (shard = none's plan).
 */
export function shardGroups(dataParallel: number, tensorParallel: number, devicesPerNode: number): number[] {
  if (dataParallel * tensorParallel <= devicesPerNode) return [dataParallel];
  const inNode = divisors(dataParallel).filter((s) => s > 1 && s * tensorParallel <= devicesPerNode);
  return inNode.length > 0 ? [dataParallel, inNode[inNode.length - 1]!] : [dataParallel];
}

/** Interleaving depths tried for `interleaved`: FairScale has none; Megatron-LM uses 2–4 chunks per rank. */
const VIRTUAL_STAGES = [2, 4];

export function searchSpace(x: SpaceInput): Space {
  const p = x.parallel;
  const excluded: { family: string; reason: string }[] = [];
  // A balance lists every virtual stage (stages × virtual_stages entries).
  const stagesFixed = p.balance ? p.balance.length / (fixed(p.virtualStages) ?? 1) : fixed(p.stages);
  const dpFixed = fixed(p.dataParallel);
  const out: Candidate[] = [];
  for (const tensorParallel of x.tensorParallel) {
   if (x.devices % tensorParallel !== 0) continue;
   const groups = x.devices / tensorParallel;
   for (const stages of divisors(groups)) {
    if (stagesFixed !== undefined && stages !== stagesFixed) continue;
    const dataParallel = groups / stages;
    if (dpFixed !== undefined && dataParallel !== dpFixed) continue;
    const family = `pp=${stages} dp=${dataParallel}${tensorParallel > 1 ? ` tp=${tensorParallel}` : ""}`;
    if (stages > x.layers) {
      excluded.push({ family, reason: `${stages} stages exceed the model's ${x.layers} layers` });
      continue;
    }
    if (x.batch % dataParallel !== 0) {
      excluded.push({ family, reason: `the batch of ${x.batch} does not split over ${dataParallel} data-parallel replicas` });
      continue;
    }
    const perReplica = x.batch / dataParallel;
    const before = out.length;
    const chunkChoices = fixed(p.chunks) !== undefined ? [fixed(p.chunks)!] : divisors(perReplica);
    // A fixed shard group must split the stage's replicas into groups of two or more (one group when it is
    // all of them); where it does not, the family gets no FSDP candidate.
    const groupFixed = fixed(p.shardGroup);
    const fsdpGroups =
      groupFixed === undefined
        ? shardGroups(dataParallel, tensorParallel, x.devicesPerNode)
        : dataParallel % groupFixed === 0 && (groupFixed > 1 || dataParallel === 1)
          ? [groupFixed]
          : [];
    const allShards: readonly ShardStrategy[] = fixed(p.shard) !== undefined ? [fixed(p.shard)!] : dataParallel === 1 ? ["none"] : SHARD_STRATEGIES;
    const shards = fsdpGroups.length > 0 ? allShards : allShards.filter((s) => s !== "fsdp");
    if (shards.length === 0) {
      excluded.push({ family, reason: `shard_group = ${groupFixed} does not split the ${dataParallel} data-parallel replicas into groups of two or more` });
      continue;
    }
    const schedules: readonly ScheduleKind[] =
      fixed(p.schedule) !== undefined ? [fixed(p.schedule)!] : stages === 1 ? ["1f1b"] : (["gpipe", "1f1b", "interleaved", "zero_bubble"] as const);
    // layer_checkpoint = none: no layer recomputed in its own backward, so no selective candidates either.
    const checkpoints: readonly SearchCheckpoint[] =
      p.checkpoint === "selective"
        ? ["never", "selective"] // no stage recompute; layers recomputed whole only where memory asks
        : fixed(p.checkpoint) !== undefined
          ? [fixed(p.checkpoint)!]
          : p.layerCheckpoint === "none"
            ? ["never", "except_last", "always"]
            : ["never", "selective", "except_last", "always"];
    for (const microBatches of chunkChoices) {
      if (perReplica % microBatches !== 0) continue;
      for (const schedule of schedules) {
        const vs = schedule !== "interleaved" ? [1] : fixed(p.virtualStages) !== undefined ? [fixed(p.virtualStages)!] : VIRTUAL_STAGES;
        for (const virtualStages of vs) {
          if (schedule === "interleaved" && (microBatches % stages !== 0 || stages * virtualStages > x.layers)) continue;
          if (p.balance && p.balance.length !== stages * virtualStages) continue;
          for (const shard of shards) {
            // Sharding over a group of one is allowed when asked for (it degenerates to none), not searched.
            if (shard !== "none" && dataParallel === 1 && fixed(p.shard) === undefined) continue;
            const fsdp = shard === "fsdp";
            const reshards = !fsdp ? [true] : fixed(p.reshardAfterForward) !== undefined ? [fixed(p.reshardAfterForward)!] : [true, false];
            // no_sync with one micro-batch reduces once per step either way: searched only with more.
            const noSyncs = !fsdp ? [false] : fixed(p.noSync) !== undefined ? [fixed(p.noSync)!] : microBatches > 1 ? [false, true] : [false];
            for (const shardGroup of fsdp ? fsdpGroups : [dataParallel]) {
              for (const noSync of noSyncs) {
                for (const reshardAfterForward of reshards) {
                  for (const checkpoint of checkpoints) {
                    // One micro-batch: "all but the last" checkpoints nothing, the same plan as never.
                    if (checkpoint === "except_last" && microBatches === 1 && checkpoints.length > 1) continue;
                    out.push({ stages, dataParallel, tensorParallel, virtualStages, microBatches, schedule, shard, reshardAfterForward, shardGroup, noSync, checkpoint });
                  }
                }
              }
            }
          }
        }
      }
    }
    if (out.length === before) {
      excluded.push({
        family,
        reason:
          `no candidate meets the given settings: chunks must divide the ${perReplica} samples per replica, and the interleaved ` +
          `schedule needs chunks to be a multiple of stages and stages × virtual_stages ≤ ${x.layers} layers`,
      });
    }
   }
  }
  return { candidates: out, excluded };
}
