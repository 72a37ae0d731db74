// Step 1 of compile: the checked train and parallel settings (and --devices) → either every number the plan
// needs (nothing left `auto`: the explicit path) or the list of settings the plan search (src/search) must
// choose. The mesh arithmetic devices = stages × data_parallel × tensor_parallel is not a choice and is done
// here either way.
import type { CheckpointMode, Optimizer, ParallelConfig, Precision, ScheduleKind, ShardStrategy, TrainConfig } from "../check/settings-types.js";
import { CompileError } from "./errors.js";

export interface ResolvedSettings {
  /** Every device: stages × dataParallel × tensorParallel. */
  readonly devices: number;
  /** Pipeline ranks p. */
  readonly stages: number;
  readonly dataParallel: number;
  /** Ranks of each tensor-parallel group (Megatron's t; 1: none). The plan is that of tensor rank 0 of
   *  every group, the others doing the same on their slices. */
  readonly tensorParallel: number;
  readonly sequenceParallel: boolean;
  readonly virtualStages: number;
  /** Layers per (virtual) stage: FairScale's balance as given, or the split the search found optimal. */
  readonly balance: readonly number[] | undefined;
  readonly microBatches: number;
  readonly microBatchSize: number;
  readonly batch: number;
  readonly seq: number | undefined;
  readonly schedule: ScheduleKind;
  readonly checkpoint: CheckpointMode;
  /** Layers whose forward is recomputed inside their backward besides @checkpoint ones (the search's
   *  selective checkpointing), ascending. */
  readonly recomputeLayers: readonly number[];
  readonly shard: ShardStrategy;
  readonly reshardAfterForward: boolean;
  /** FSDP: ranks of each shard group (hybrid sharding when below dataParallel); dataParallel otherwise. */
  readonly shardGroup: number;
  /** FSDP: reduce-scatter each unit once per step, gradients accumulated unsharded (no_sync). */
  readonly noSync: boolean;
  readonly bucketMB: number;
  readonly fsdpMinParams: number;
  /** FSDP: units gathered ahead of the one computing (1: the next one, FairScale's and FSDP's default). */
  readonly fsdpPrefetch: number;
  readonly precision: Precision;
  /** What gradients are held and reduced in (train.reduce_dtype). */
  readonly reduceDtype: Precision;
  readonly optimizer: Optimizer;
  readonly clipGradNorm: number | undefined;
}

export interface MeshSizes {
  readonly devices: number | undefined;
  readonly stages: number | undefined;
  readonly dataParallel: number | undefined;
}

/** The mesh with its tensor axis: `devices` counts every device, stages × data_parallel the groups. */
export interface Mesh extends MeshSizes {
  readonly tensorParallel: number | undefined;
}

const num = (x: number | "auto"): number | undefined => (x === "auto" ? undefined : x);

/**
 * devices = stages × data_parallel: any one of the three follows from the other two, and stages alone means
 * data_parallel = 1 (FairScale's Pipe on `stages` devices). Undefined where nothing determines it.
 */
export function deriveMesh(known: MeshSizes, label = "devices"): MeshSizes {
  const { devices, stages, dataParallel } = known;
  if (devices !== undefined && stages !== undefined && dataParallel !== undefined) {
    if (stages * dataParallel !== devices) {
      throw new CompileError(`${label} = ${devices} but stages × data_parallel = ${stages} × ${dataParallel} = ${stages * dataParallel}`);
    }
    return known;
  }
  if (stages !== undefined && dataParallel !== undefined) return { devices: stages * dataParallel, stages, dataParallel };
  if (devices !== undefined && stages !== undefined) {
    if (devices % stages !== 0) throw new CompileError(`${label} = ${devices} is not a multiple of stages = ${stages}`);
    return { devices, stages, dataParallel: devices / stages };
  }
  if (devices !== undefined && dataParallel !== undefined) {
    if (devices % dataParallel !== 0) throw new CompileError(`${label} = ${devices} is not a multiple of data_parallel = ${dataParallel}`);
    return { devices, stages: devices / dataParallel, dataParallel };
  }
  if (stages !== undefined && devices === undefined && dataParallel === undefined) return { devices: stages, stages, dataParallel: 1 };
  return known;
}

/** The mesh from the file and --devices; `devices` is --devices when given and must agree with the file. */
export function resolveMesh(parallel: ParallelConfig, devices: number | undefined): Mesh {
  const fileDevices = num(parallel.devices);
  if (devices !== undefined && fileDevices !== undefined && devices !== fileDevices) {
    throw new CompileError(`--devices ${devices} contradicts parallel.devices = ${fileDevices}`);
  }
  // A balance lists every virtual stage: stages × virtual_stages entries (parallel-feasibility.ts).
  const virtual = num(parallel.virtualStages) ?? 1;
  const stagesGiven = parallel.balance ? parallel.balance.length / virtual : num(parallel.stages);
  if (parallel.balance && (!Number.isInteger(stagesGiven) || (num(parallel.stages) !== undefined && num(parallel.stages) !== stagesGiven))) {
    throw new CompileError(`stages = ${num(parallel.stages)}${virtual > 1 ? ` × virtual_stages = ${virtual}` : ""} but the balance has ${parallel.balance.length} entries`);
  }
  const all = devices ?? fileDevices;
  const dataParallel = num(parallel.dataParallel);
  const tp = num(parallel.tensorParallel);
  if (tp === undefined) {
    // The search chooses tensor_parallel, unless stages and data_parallel leave it one value: with the
    // devices, what they leave; without, none (the mesh given is the whole of it).
    if (all === undefined && stagesGiven !== undefined && dataParallel !== undefined) return { devices: stagesGiven * dataParallel, stages: stagesGiven, dataParallel, tensorParallel: 1 };
    if (all === undefined || stagesGiven === undefined || dataParallel === undefined) return { devices: all, stages: stagesGiven, dataParallel, tensorParallel: undefined };
    if (all % (stagesGiven * dataParallel) !== 0) {
      throw new CompileError(`devices = ${all} is not a multiple of stages × data_parallel = ${stagesGiven} × ${dataParallel}`);
    }
    return { devices: all, stages: stagesGiven, dataParallel, tensorParallel: all / (stagesGiven * dataParallel) };
  }
  if (all !== undefined && all % tp !== 0) throw new CompileError(`devices = ${all} is not a multiple of tensor_parallel = ${tp}`);
  // The pipe × data mesh of tensor-parallel groups.
  const groups = deriveMesh({ devices: all === undefined ? undefined : all / tp, stages: stagesGiven, dataParallel }, tp === 1 ? "devices" : `devices / tensor_parallel`);
  return { ...groups, devices: groups.devices === undefined ? undefined : groups.devices * tp, tensorParallel: tp };
}

/** The parallel settings still `auto` once the mesh is derived: what the search chooses. */
export function autoSettings(parallel: ParallelConfig, mesh: Mesh): string[] {
  const out: string[] = [];
  if (mesh.tensorParallel === undefined) out.push("tensor_parallel");
  if (mesh.stages === undefined) out.push("stages");
  if (mesh.dataParallel === undefined) out.push("data_parallel");
  if (parallel.chunks === "auto") out.push("chunks");
  if (parallel.schedule === "auto") out.push("schedule");
  // virtual_stages only means something for the interleaved schedule.
  if (parallel.virtualStages === "auto" && (parallel.schedule === "auto" || parallel.schedule === "interleaved")) out.push("virtual_stages");
  // selective: the search chooses which layers (if any) to recompute whole.
  if (parallel.checkpoint === "auto" || parallel.checkpoint === "selective") out.push("checkpoint");
  // A group of one has nothing to shard: shard auto is none there, not a choice.
  if (parallel.shard === "auto" && mesh.dataParallel !== 1) out.push("shard");
  if (parallel.reshardAfterForward === "auto" && (parallel.shard === "auto" || parallel.shard === "fsdp") && mesh.dataParallel !== 1) out.push("reshard_after_forward");
  return out;
}

/** The settings that come from the train section alone, whatever the parallel choices. */
export function trainSettings(train: TrainConfig, parallel: ParallelConfig): Pick<ResolvedSettings, "batch" | "seq" | "bucketMB" | "fsdpMinParams" | "fsdpPrefetch" | "precision" | "reduceDtype" | "optimizer" | "clipGradNorm"> {
  return {
    batch: train.batch,
    seq: train.seq,
    bucketMB: parallel.bucketMB,
    fsdpMinParams: parallel.fsdpMinParams,
    fsdpPrefetch: parallel.fsdpPrefetch,
    precision: train.precision,
    reduceDtype: train.reduceDtype,
    optimizer: train.optimizer,
    clipGradNorm: train.clipGradNorm,
  };
}

/** Whether ranks of a tensor-parallel group of t also split the sequence (Megatron's sequence parallelism):
 *  `true` asks for it, `auto` takes it wherever it applies (a group of 2 or more, a sequence it divides): it
 *  moves the same bytes as tensor parallelism alone and keeps 1/t of the norms' and residuals' activations. */
export function sequenceParallelAt(parallel: ParallelConfig, t: number, seq: number | undefined): boolean {
  if (parallel.sequenceParallel === false || t === 1 || seq === undefined) return false;
  if (seq % t === 0) return true;
  if (parallel.sequenceParallel === true) throw new CompileError(`sequence_parallel: the sequence of ${seq} does not split over tensor_parallel = ${t} ranks`);
  return false;
}

/** The explicit path: every parallel setting given (autoSettings is empty). The balance, when not given, is
 *  left undefined for compile to fill with the optimal split. */
export function resolveSettings(train: TrainConfig, parallel: ParallelConfig, layerCount: number, devices?: number): ResolvedSettings {
  const mesh = resolveMesh(parallel, devices);
  const left = autoSettings(parallel, mesh);
  if (left.length > 0) throw new Error(`internal: resolveSettings with ${left.join(", ")} still auto (the search chooses those)`);
  const stages = mesh.stages!;
  const dataParallel = mesh.dataParallel!;
  const tensorParallel = mesh.tensorParallel!;
  const schedule = parallel.schedule as ScheduleKind;
  const virtualStages = parallel.virtualStages === "auto" ? 1 : parallel.virtualStages;
  const microBatches = parallel.chunks as number;
  if (schedule !== "interleaved" && virtualStages !== 1) {
    throw new CompileError(`virtual_stages = ${virtualStages} needs schedule = interleaved (schedule is ${schedule})`);
  }
  if (stages * virtualStages > layerCount) {
    throw new CompileError(`${stages} stages × ${virtualStages} virtual stages = ${stages * virtualStages} exceeds the model's ${layerCount} layers`);
  }
  if (train.batch % (dataParallel * microBatches) !== 0) {
    throw new CompileError(`batch = ${train.batch} does not split into data_parallel × chunks = ${dataParallel} × ${microBatches} equal micro-batches`);
  }
  if (schedule === "interleaved" && microBatches % stages !== 0) {
    throw new CompileError(`the interleaved schedule needs chunks to be a multiple of stages (micro-batches go in groups of p, as in Megatron-LM); got chunks = ${microBatches}, stages = ${stages}`);
  }
  return {
    ...trainSettings(train, parallel),
    devices: stages * dataParallel * tensorParallel,
    stages,
    dataParallel,
    tensorParallel,
    sequenceParallel: sequenceParallelAt(parallel, tensorParallel, train.seq),
    virtualStages,
    balance: parallel.balance,
    microBatches,
    microBatchSize: train.batch / (dataParallel * microBatches),
    schedule,
    checkpoint: parallel.checkpoint as CheckpointMode,
    recomputeLayers: [],
    shard: parallel.shard === "auto" ? "none" : parallel.shard,
    reshardAfterForward: parallel.reshardAfterForward === "auto" ? true : parallel.reshardAfterForward,
    ...fsdpGrouping(parallel, parallel.shard === "auto" ? "none" : parallel.shard, dataParallel),
  };
}

/** shard_group and no_sync once the strategy and the data-parallel degree are known: settings of FSDP only
 *  (under another strategy the group is the whole data-parallel group and gradients reduce as it does), the
 *  file's `auto` taken as plain FSDP (the search, when it runs, chooses instead). */
export function fsdpGrouping(parallel: ParallelConfig, shard: ShardStrategy, dataParallel: number): Pick<ResolvedSettings, "shardGroup" | "noSync"> {
  if (shard !== "fsdp") return { shardGroup: dataParallel, noSync: false };
  const shardGroup = parallel.shardGroup === "auto" ? dataParallel : parallel.shardGroup;
  if (dataParallel % shardGroup !== 0) {
    throw new CompileError(`shard_group = ${shardGroup} does not divide data_parallel = ${dataParallel} (each shard group must be a whole number of replicas' worth of ranks)`);
  }
  if (shardGroup === 1 && dataParallel > 1) {
    throw new CompileError(`shard_group = 1 shards nothing: every rank would hold the whole model (that is shard = none)`);
  }
  return { shardGroup, noSync: parallel.noSync === true };
}
