// Step 1 of compile: the checked train and parallel settings (and --devices) → every number the plan needs,
// with derivations from derive.ts and a clear error for whatever is still `auto`.
import type { CheckpointMode, Optimizer, ParallelConfig, Precision, ScheduleKind, ShardStrategy, TrainConfig } from "../check/settings-types.js";
import { SHARD_STRATEGIES } from "../check/settings-types.js";
import { deriveCheckpoint, deriveChunks, deriveMesh, deriveReshard, deriveSchedule, deriveShard, deriveVirtualStages } from "./derive.js";
import { autoNotImplemented, CompileError } from "./errors.js";

export interface ResolvedSettings {
  readonly devices: number;
  /** Pipeline ranks p. */
  readonly stages: number;
  readonly dataParallel: number;
  readonly virtualStages: number;
  /** Layers per stage as given (FairScale's balance), when given. */
  readonly balance: readonly number[] | undefined;
  readonly microBatches: number;
  readonly microBatchSize: number;
  readonly batch: number;
  readonly seq: number | undefined;
  readonly schedule: ScheduleKind;
  readonly checkpoint: CheckpointMode;
  readonly shard: ShardStrategy;
  readonly reshardAfterForward: boolean;
  readonly bucketMB: number;
  readonly fsdpMinParams: number;
  readonly precision: Precision;
  readonly optimizer: Optimizer;
  readonly clipGradNorm: number | undefined;
}

const num = (x: number | "auto"): number | undefined => (x === "auto" ? undefined : x);

/** `devices` is --devices when given; it must agree with parallel.devices. */
export function resolveSettings(train: TrainConfig, parallel: ParallelConfig, layerCount: number, devices?: number): ResolvedSettings {
  const fileDevices = num(parallel.devices);
  if (devices !== undefined && fileDevices !== undefined && devices !== fileDevices) {
    throw new CompileError(`--devices ${devices} contradicts parallel.devices = ${fileDevices}`);
  }
  const stagesGiven = parallel.balance ? parallel.balance.length : num(parallel.stages);
  const mesh = deriveMesh({ devices: devices ?? fileDevices, stages: stagesGiven, dataParallel: num(parallel.dataParallel) });
  if (mesh.stages === undefined) throw autoNotImplemented("stages", "4");
  if (mesh.dataParallel === undefined) throw autoNotImplemented("data_parallel", "8");
  const stages = mesh.stages;
  const dataParallel = mesh.dataParallel;
  const shard = deriveShard(parallel, dataParallel);
  if (shard === undefined) throw autoNotImplemented("shard", "fsdp", SHARD_STRATEGIES.join(", "));

  const schedule = deriveSchedule(parallel);
  const virtualStages = deriveVirtualStages(parallel, schedule);
  if (schedule !== "interleaved" && virtualStages !== 1) {
    throw new CompileError(`virtual_stages = ${virtualStages} needs schedule = interleaved (schedule is ${schedule})`);
  }
  if (stages * virtualStages > layerCount) {
    throw new CompileError(`${stages} stages × ${virtualStages} virtual stages = ${stages * virtualStages} exceeds the model's ${layerCount} layers`);
  }
  if (parallel.balance && virtualStages > 1) {
    throw new CompileError("not implemented: an explicit balance with virtual_stages > 1; give stages and the layers are split evenly over the virtual stages");
  }
  const microBatches = deriveChunks(parallel, stages);
  if (train.batch % (dataParallel * microBatches) !== 0) {
    throw new CompileError(
      `batch = ${train.batch} does not split into data_parallel × chunks = ${dataParallel} × ${microBatches} equal micro-batches` +
        (parallel.chunks === "auto" ? " (chunks = auto is one micro-batch per pipeline rank; give chunks so that data_parallel × chunks divides the batch, e.g. --set parallel.chunks=N)" : ""),
    );
  }
  if (schedule === "interleaved" && microBatches % stages !== 0) {
    throw new CompileError(`the interleaved schedule needs chunks to be a multiple of stages (micro-batches go in groups of p, as in Megatron-LM); got chunks = ${microBatches}, stages = ${stages}`);
  }
  return {
    devices: stages * dataParallel,
    stages,
    dataParallel,
    virtualStages,
    balance: parallel.balance,
    microBatches,
    microBatchSize: train.batch / (dataParallel * microBatches),
    batch: train.batch,
    seq: train.seq,
    schedule,
    checkpoint: deriveCheckpoint(parallel),
    shard,
    reshardAfterForward: deriveReshard(parallel),
    bucketMB: parallel.bucketMB,
    fsdpMinParams: parallel.fsdpMinParams,
    precision: train.precision,
    optimizer: train.optimizer,
    clipGradNorm: train.clipGradNorm,
  };
}
