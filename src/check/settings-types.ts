// Typed train and parallel configurations produced by the settings checker; `auto` is left for the planner.

export type Auto = "auto";

export type Optimizer =
  | { readonly kind: "sgd"; readonly lr: number; readonly momentum: number; readonly weightDecay: number; readonly nesterov: boolean }
  | {
      readonly kind: "adam" | "adamw";
      readonly lr: number;
      readonly betas: readonly [number, number];
      readonly eps: number;
      readonly weightDecay: number;
    };

export type DataSource =
  | { readonly kind: "synthetic" }
  | { readonly kind: "tokens"; readonly path: string; readonly dtype: "u16" | "u32" }
  | { readonly kind: "npy"; readonly files: Readonly<Record<string, string>> };

export const PRECISIONS = ["fp32", "bf16", "fp16"] as const;
export type Precision = (typeof PRECISIONS)[number];

export interface TrainConfig {
  /** Global batch size (all micro-batches of all data-parallel replicas). */
  readonly batch: number;
  readonly seq?: number;
  readonly steps: number;
  readonly seed: number;
  readonly optimizer: Optimizer;
  readonly clipGradNorm?: number;
  readonly precision: Precision;
  /** What gradients are accumulated and reduced in (FSDP2's `reduce_dtype`): fp32 (the default, as Megatron-LM
   *  does for bf16), or the 16-bit compute type itself, halving gradient memory and traffic. */
  readonly reduceDtype: Precision;
  /** fp16 only: dynamic loss scaling or a fixed scale. */
  readonly lossScale: "dynamic" | number;
  readonly data: DataSource;
}

export const SCHEDULES = ["gpipe", "1f1b", "interleaved", "zero_bubble"] as const;
export type ScheduleKind = (typeof SCHEDULES)[number];
export const CHECKPOINT_MODES = ["always", "except_last", "never"] as const;
/** Per-layer activation checkpointing (FSDP's checkpoint_wrapper on the blocks): none, every layer of every
 *  repeat stack, or (auto) the layers the search must recompute to fit. */
export const LAYER_CHECKPOINT_MODES = ["none", "all"] as const;
export type LayerCheckpointMode = (typeof LAYER_CHECKPOINT_MODES)[number];
export type CheckpointMode = (typeof CHECKPOINT_MODES)[number];
/** What `parallel.checkpoint` may say besides auto: a schedule-level mode a plan holds, or `selective`, which
 *  the plan search resolves into `never` with the layers it recomputes (settings.ts checkpointMode). */
export type CheckpointSetting = CheckpointMode | "selective";
export const SHARD_STRATEGIES = ["none", "oss", "sddp", "fsdp"] as const;
export type ShardStrategy = (typeof SHARD_STRATEGIES)[number];

export interface ParallelConfig {
  readonly devices: number | Auto;
  readonly stages: number | Auto;
  /** Layers per stage, as FairScale's Pipe `balance`; under the interleaved schedule per virtual stage (Megatron-LM's model
   *  chunks: stages × virtual_stages entries, chunk k on pipeline rank k mod stages). */
  readonly balance?: readonly number[];
  readonly chunks: number | Auto;
  readonly schedule: ScheduleKind | Auto;
  readonly virtualStages: number | Auto;
  readonly checkpoint: CheckpointSetting | Auto;
  readonly shard: ShardStrategy | Auto;
  readonly reshardAfterForward: boolean | Auto;
  readonly bucketMB: number;
  readonly dataParallel: number | Auto;
  /** Size-based FSDP auto-wrap threshold (parameters per unit). */
  readonly fsdpMinParams: number;
  /** FSDP: how many units ahead of the one computing are all-gathered (FSDP2's forward/backward prefetch). */
  readonly fsdpPrefetch: number;
  readonly layerCheckpoint: LayerCheckpointMode | Auto;
  /** Megatron's tensor parallelism: ranks of one tensor-parallel group (inside a node); devices =
   *  stages × data_parallel × tensor_parallel. */
  readonly tensorParallel: number | Auto;
  /** Megatron's sequence parallelism over the tensor-parallel group. */
  readonly sequenceParallel: boolean | Auto;
  /** FSDP's shard group (hybrid sharding: FSDP2's 2-D mesh, ZeRO++'s hpZ): ranks of a stage's data-parallel
   *  group that split the model state among themselves, consecutive ranks (inside a node); the groups hold
   *  replicas and all-reduce their gradient shards once per step. `auto`: the plan search's choice when it
   *  runs, else the whole data-parallel group (plain FSDP). */
  readonly shardGroup: number | Auto;
  /** FSDP's `no_sync`: micro-batches accumulate unsharded gradients and each unit is reduce-scattered once per
   *  step (the unit's whole gradient held across the step) instead of after every micro-batch. `auto`: the
   *  plan search's choice when it runs, else false. */
  readonly noSync: boolean | Auto;
}
