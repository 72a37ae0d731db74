// The Plan: the versioned JSON document `fsm compile` writes and the runtime, `fsm schedule` and the
// visualizers read. Plain data only (no classes, no Maps), so JSON.parse(JSON.stringify(plan)) equals it.
//
// Devices form a (pipe × data × tensor) mesh:
//   rank = (pipe · dataSize + data) · tensorSize + tensor
// so the data-parallel replicas of one pipeline rank are consecutive (a stage's shard group stays inside a
// node as long as it fits one), and the pipeline is the slowest axis, as in Megatron-LM.
//
// Programs: the data-parallel replicas of a pipeline rank run the same actions, so they share ONE program
// with the list of their ranks. Rank-valued fields inside a program resolve per replica:
//   - p2p peers (SEND_*/RECV_*) are written as the replica-0 rank of the peer (data = 0); replica r (the
//     r-th rank in `program.ranks`) talks to that rank + r·tensorSize, i.e. replica r of stage s talks to
//     replica r of stage s ± 1; `tied` collectives likewise join replica r of each stage involved;
//   - the roots of `data` collectives (BROADCAST/REDUCE of OSS/ShardedDDP buckets) are absolute ranks: the
//     group is the replicas themselves, so every replica names the same root;
//   - `world` collectives span every device.

export const PLAN_FORMAT = "fsm-plan";
/** 2: the file carries a content hash (content-hash.ts); version-1 files load without one. */
export const PLAN_VERSION = 2;

export const MESH_AXES = ["pipe", "data", "tensor"] as const;
export const RANK_FORMULA = "rank = (pipe * data_size + data) * tensor_size + tensor";

export interface Plan {
  readonly format: typeof PLAN_FORMAT;
  readonly version: number;
  /** Version of the fsm that wrote it. */
  readonly fsm: string;
  readonly model: PlanModel;
  readonly cluster: PlanCluster;
  readonly settings: PlanSettings;
  readonly mesh: PlanMesh;
  readonly graph: PlanGraph;
  /** One per (virtual) pipeline stage, in stage order. */
  readonly stages: readonly PlanStage[];
  /** One per (virtual) stage: its shard plan across its data-parallel group. */
  readonly shard: readonly PlanShard[];
  /** One per pipeline rank. */
  readonly programs: readonly PlanProgram[];
  /** One per program (same index). */
  readonly memory: readonly PlanMemory[];
  readonly predicted: PlanPrediction;
  /** How the plan search chose the settings, when any were auto (absent for fully explicit settings). */
  readonly search?: PlanSearch;
  /** What `fsm run` needs besides the step: the train section's steps, seed and data (absent in plans
   *  written before `fsm run` existed). */
  readonly run?: PlanRun;
}

export interface PlanRun {
  readonly steps: number;
  readonly seed: number;
  /** fp16 only: dynamic loss scaling (start 2^16, halve on overflow, double after 2000 clean steps) or a
   *  fixed scale. Absent for bf16/fp32 and in plans written before mixed precision ran. */
  readonly lossScale?: "dynamic" | number;
  readonly data:
    | { readonly kind: "synthetic" }
    | { readonly kind: "tokens"; readonly path: string; readonly dtype: "u16" | "u32" }
    | { readonly kind: "npy"; readonly files: Readonly<Record<string, string>> };
}

/** One candidate the search kept, in the search's ranking (pipeline simulator step time). */
export interface PlanSearchCandidate {
  /** `pp=4 dp=16 shard=oss chunks=8 schedule=1f1b checkpoint=never` */
  readonly settings: string;
  /** --set arguments that compile exactly this candidate without the search. */
  readonly set: readonly string[];
  readonly balance: readonly number[];
  readonly recomputeLayers: readonly number[];
  readonly estimatedStepSeconds: number;
  readonly simulatedStepSeconds: number | null;
  readonly estimatedMemoryBytes: number;
  /** Per pipeline rank: predicted seconds of one micro-batch. */
  readonly stageSeconds: readonly number[];
  /** `rejected`: ranked higher but its memory plan did not fit (`reason`); then the one `chosen`. */
  readonly status: "chosen" | "alternative" | "rejected";
  readonly reason?: string;
}

export interface PlanSearch {
  readonly chosen: string;
  readonly candidates: readonly PlanSearchCandidate[];
  /** Per pipeline depth × data-parallel degree: its best estimate, or why it has none. */
  readonly families: readonly { readonly family: string; readonly bestStepSeconds?: number; readonly reason?: string }[];
  readonly stats: {
    readonly candidates: number;
    readonly evaluated: number;
    readonly pruned: number;
    readonly infeasible: number;
    readonly simulated: number;
    readonly seconds: number;
  };
  /** The compiled plan's own predicted step time (its layer-level simulation). */
  readonly plannedStepSeconds: number;
  /** Fraction of device memory the final search planned for: below 1 when earlier choices' memory plans
   *  overflowed (`overflowed`) and the search ran again with less. */
  readonly memoryScale: number;
  readonly overflowed?: readonly string[];
  /** The chosen settings with one changed at a time: what each other value would give. */
  readonly neighbors: readonly { readonly setting: string; readonly value: string; readonly stepSeconds?: number; readonly memoryBytes?: number; readonly reason?: string }[];
}

export interface PlanModel {
  readonly name: string;
  /** The .fsm file it was compiled from, as given. */
  readonly source: string;
  readonly parameters: number;
}

export interface PlanCluster {
  readonly profile: string;
  readonly devices: number;
  readonly nodes: number;
  readonly devicesPerNode: number;
  /** Memory of one device, bytes. */
  readonly memoryBytes: number;
}

export interface PlanSettings {
  /** Pipeline ranks p (FairScale's len(balance) when virtualStages = 1). */
  readonly stages: number;
  readonly dataParallel: number;
  /** Ranks of each tensor-parallel group; the programs are tensor rank 0's (the others run the same
   *  actions on their slices: graph.params[].split). */
  readonly tensorParallel: number;
  /** Megatron's sequence parallelism over each tensor-parallel group: norms and the residual stream on 1/tp of
   *  the sequence, whose graph's S is a rank's part of it (src/graph/sequence.ts); absent: false. */
  readonly sequenceParallel?: boolean;
  /** Virtual stages per pipeline rank (interleaved); stages × virtualStages stages in all. */
  readonly virtualStages: number;
  /** Micro-batches per step per replica (FairScale's chunks). */
  readonly microBatches: number;
  readonly microBatchSize: number;
  /** Global batch: dataParallel × microBatches × microBatchSize. */
  readonly batch: number;
  readonly seq: number | null;
  readonly schedule: string;
  readonly checkpoint: string;
  /** Layers recomputed inside their backward beyond @checkpoint ones (selective checkpointing). Absent in
   *  plans written before the search existed: none. */
  readonly recomputeLayers?: readonly number[];
  readonly shard: string;
  readonly reshardAfterForward: boolean;
  /** FSDP: ranks of each shard group, when smaller than dataParallel (hybrid sharding: the groups replicate
   *  the state and all-reduce gradient shards once per step). Absent: the whole data-parallel group. */
  readonly shardGroup?: number;
  /** FSDP: units reduce-scattered once per step, gradients accumulated unsharded (no_sync). Absent: false. */
  readonly noSync?: boolean;
  readonly bucketMB: number;
  /** FSDP: units all-gathered ahead of the one computing. Absent in plans written before it existed: 1. */
  readonly fsdpPrefetch?: number;
  readonly precision: string;
  /** What gradients are held and reduced in (train.reduce_dtype), when not fp32. Absent: fp32 (what every
   *  plan before it ran, though those priced 16-bit gradients). */
  readonly reduceDtype?: string;
  readonly optimizer: string;
  readonly clipGradNorm: number | null;
}

export interface PlanMesh {
  readonly axes: readonly string[];
  /** [pipe, data, tensor]. */
  readonly shape: readonly number[];
  readonly rank: string;
}

// ---- the training graph ----------------------------------------------------------------------------------

/** Attribute values as JSON: dims and shapes as their text form (`B*S`), parameter references by name,
 *  non-finite numbers spelled out (JSON has no Infinity). Strings, finite numbers and booleans as they are. */
export type PlanAttr =
  | number
  | boolean
  | string
  | { readonly dim: string }
  | { readonly shape: readonly string[] }
  | { readonly param: string }
  | { readonly number: "Infinity" | "-Infinity" | "NaN" };

export interface PlanTensor {
  readonly name: string;
  readonly dtype: string;
  /** Dims as text: `768`, `B`, `B*S`. */
  readonly shape: readonly string[];
  readonly kind: string;
}

/** Op ids are indices into `ops`, tensor ids indices into `tensors`. */
export interface PlanOp {
  readonly op: string;
  readonly attrs: Readonly<Record<string, PlanAttr>>;
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly phase: string;
  readonly layer: number;
  readonly scope: string;
  readonly forwardOp?: number;
}

export interface PlanLayer {
  readonly name: string;
  readonly params: readonly string[];
  readonly annotations: { readonly stage?: number; readonly checkpoint?: boolean; readonly fsdpUnit?: boolean };
}

export interface PlanParam {
  readonly name: string;
  readonly tensor: number;
  readonly layer: number;
  readonly scope: string;
  readonly init: string;
  readonly aliases: readonly string[];
  /** A tensor-parallel rank's slice of the whole parameter (graph.ts ParamSplit); absent: whole. */
  readonly split?: { readonly axis: number; readonly parts: number; readonly blocks: readonly number[] };
}

export interface PlanState {
  readonly name: string;
  readonly tensor: number;
  readonly role: string;
  readonly param?: string;
}

export interface PlanGraph {
  readonly inputs: readonly number[];
  readonly loss: number;
  readonly tensors: readonly PlanTensor[];
  readonly ops: readonly PlanOp[];
  readonly layers: readonly PlanLayer[];
  readonly params: readonly PlanParam[];
  readonly states: readonly PlanState[];
  /** [leaf tensor, its value after the step]. */
  readonly updates: readonly (readonly [number, number])[];
  /** [parameter name, gradient tensor]. */
  readonly paramGrads: readonly (readonly [string, number])[];
}

// ---- stages and shard groups -----------------------------------------------------------------------------

export interface PlanStage {
  /** Virtual stage index k (Action.stage). */
  readonly index: number;
  /** Pipeline rank that runs it: k mod stages. */
  readonly pipeRank: number;
  /** First and last layer, inclusive. */
  readonly layers: readonly [number, number];
  /** Global ranks of its data-parallel replicas (its shard group). */
  readonly ranks: readonly number[];
  /** Forward tensors that cross into the next stage (their gradients cross back); model inputs are fed to
   *  every stage by the data loader and never travel. Empty for the last stage. */
  readonly sends: readonly number[];
}

export interface PlanStepPoint {
  readonly when: "before" | "after";
  readonly phase: string;
  readonly layer: number;
  readonly microBatch: "each" | "first" | "last";
}

export interface PlanShardCollective {
  readonly kind: string;
  readonly of: "unit" | "gradBucket" | "broadcastBucket";
  readonly unit: number;
  readonly bytes: number;
  readonly root?: number;
  readonly at: PlanStepPoint;
}

export interface PlanTiedCollective {
  readonly param: string;
  readonly unit: number;
  readonly bytes: number;
  readonly stages: readonly number[];
  readonly order: "tiedFirst" | "reductionFirst" | null;
  readonly at: PlanStepPoint;
}

export interface PlanUnit {
  readonly index: number;
  readonly root: boolean;
  readonly layers: readonly number[];
  /** Members of the flat parameter: [name, element offset, numel]. */
  readonly params: readonly (readonly [string, number, number])[];
  readonly numel: number;
  readonly paddedNumel: number;
  /** Group rank g holds elements [g·shardNumel, (g+1)·shardNumel) of the padded flat parameter. */
  readonly shardNumel: number;
}

export interface PlanBucket {
  readonly index: number;
  /** Group rank that receives (REDUCE) or sends (BROADCAST) it. */
  readonly owner?: number;
  readonly params: readonly string[];
  readonly numel: number;
  readonly bytes: number;
}

export interface PlanShard {
  readonly stage: number;
  readonly strategy: string;
  /** Global ranks by group rank. */
  readonly ranks: readonly number[];
  readonly bytesPerParam: { readonly param: number; readonly grad: number; readonly optimizer: number };
  readonly units: readonly PlanUnit[];
  readonly gradBuckets: readonly PlanBucket[];
  readonly broadcastBuckets: readonly PlanBucket[];
  /** oss/sddp: parameter → group rank that owns its optimizer state (and, for sddp, its gradient). */
  readonly owners: Readonly<Record<string, number>>;
  readonly collectives: readonly PlanShardCollective[];
  /** Weights this stage holds a replica of, shared with other stages (a tied embedding): one all-reduce per
   *  data-parallel replica r over replica r of every holder stage sums their partial gradients, before the
   *  stage's own reduction of the weight (`tiedFirst`: fsdp, sddp, every micro-batch) or after it
   *  (`reductionFirst`: none, oss, once per step); `null` in a group of one. Action.unit is `unit`. */
  readonly tied: readonly PlanTiedCollective[];
  /** Persistent model state per group rank (replicas of tied weights included). */
  readonly stateBytes: readonly { readonly param: number; readonly grad: number; readonly optimizer: number }[];
  /** modelStateBytes (the ZeRO formula) for the stage's parameters and group. */
  readonly zeroFormulaBytes: number;
  /** oss/sddp: the largest owner's sharded bytes under our min-max partition and under FairScale OSS's
   *  greedy (declaration order, each parameter to the currently smallest rank), so users see the gain. */
  readonly partition?: { readonly largestShardBytes: number; readonly greedyLargestShardBytes: number };
}

// ---- programs ----------------------------------------------------------------------------------------------

export type PlanCollectiveGroup = "data" | "tied" | "world";

export interface PlanActionCollective {
  /** `data`: the stage's shard group (plan.shard[stage].ranks); `tied`: replica r of every stage holding the
   *  weight; `world`: every device. */
  readonly group: PlanCollectiveGroup;
  /** What the action's unit indexes: an FSDP unit or a bucket of plan.shard[stage], or a tied all-reduce
   *  (plan.shard[stage].tied, by unit); gradNorm is the all-reduce of squared gradient norms for clipping. */
  readonly of: "unit" | "gradBucket" | "broadcastBucket" | "tiedGrad" | "gradNorm";
  /** The full buffer, in src/cost/collectives.ts's convention. */
  readonly bytes: number;
}

/**
 * One action of a program. Execution: a stream runs its actions in list order; an action starts when its
 * stream is free and every dependency holds:
 *   - deps: those actions have finished;
 *   - partial [a, layer]: compute action a has finished that layer (a collective hung on a point inside a
 *     stage's forward or backward);
 *   - gates [layer, a] (compute actions): before running that layer, action a must have finished (an FSDP
 *     unit is gathered just before the layer that needs it).
 * Compute actions run their stage's layers in order: F and R first to last, B, I and W last to first.
 * SEND/RECV pairs and `tied`/`world` collectives are rendezvous across programs; `data` collectives join the
 * program's own replicas, which run the same list.
 * A FREE (compute stream, zero time, e.g. `0FREE2u1`) releases an FSDP unit's gathered weights: its deps are
 * the last compute action using them and the ALL_GATHER of the same stage, micro-batch and unit. The memory
 * plan's `gathered` buffer ends earlier, at its `toLayer` inside that action; the FREE only tells a runtime
 * without the memory plan when the unit may go.
 */
export interface PlanAction {
  readonly id: number;
  /** src/schedule/action.ts text form, e.g. `1F3`, `2SEND_F3@24`, `0ALL_GATHER2u1`, `0FREE2u1`, `0OPTIMIZER`. */
  readonly text: string;
  readonly stream: "compute" | "comm";
  readonly deps: readonly number[];
  readonly partial?: readonly (readonly [number, number])[];
  readonly gates?: readonly (readonly [number, number])[];
  readonly collective?: PlanActionCollective;
  /** Predicted start and end, seconds from the start of the step. */
  readonly start: number;
  readonly end: number;
}

export interface PlanProgram {
  readonly id: number;
  /** Pipeline rank. */
  readonly pipeRank: number;
  /** Virtual stages it runs. */
  readonly stages: readonly number[];
  /** Global ranks of the data-parallel replicas sharing it; replica r is ranks[r]. */
  readonly ranks: readonly number[];
  readonly streams: { readonly compute: readonly number[]; readonly comm: readonly number[] };
  readonly actions: readonly PlanAction[];
}

// ---- memory and prediction -------------------------------------------------------------------------------

export const BUFFER_KINDS = ["param", "grad", "optimizer", "activation", "gathered", "comm", "workspace"] as const;
export type BufferKind = (typeof BUFFER_KINDS)[number];

export interface PlanBuffer {
  readonly name: string;
  readonly kind: BufferKind;
  readonly bytes: number;
  /** Byte offset in the program's arena. */
  readonly offset: number;
  /** Action ids of the program: the buffer is written from `from`'s start and last read by `to`. */
  readonly from: number;
  /** When `from` is a compute action that creates the buffer part-way (an FSDP unit's unsharded gradient,
   *  from the first layer of the backward that writes it): the layer at whose start it is allocated. */
  readonly fromLayer?: number;
  readonly to: number;
  /** When `to` is a compute action that is done with the buffer part-way (an FSDP unit freed after its last
   *  layer): the layer after which it is released. */
  readonly toLayer?: number;
}

export interface PlanMemory {
  readonly program: number;
  /** Size of the static arena every rank of the program allocates. */
  readonly arenaBytes: number;
  /** Most bytes live at once in the predicted run (≤ arenaBytes; the difference is fragmentation). */
  readonly peakBytes: number;
  readonly buffers: readonly PlanBuffer[];
  /** What `fsm run` allocates, by replica (ranks[r]): each device's arena as lowering lays out its slots, and
   *  the most bytes that layout holds at once. Absent when compile did not lay the arenas out (a plan over
   *  the default's budget, `--arenas never`, one the runtime cannot run, or a plan from before it did). */
  readonly runtime?: {
    readonly arenaBytes: readonly number[];
    readonly liveBytes: readonly number[];
    /** A GPU device's memory besides its arena (kernel scratch, error record, cuBLAS workspace), by replica;
     *  absent for devices that hold none (CPUs). */
    readonly reservedBytes?: readonly number[];
  };
}

export interface PlanPrediction {
  readonly stepTimeSeconds: number;
  /** Idle compute time over all ranks ÷ (ranks × step time). */
  readonly bubbleFraction: number;
  /** Step time minus the step time with free communication. */
  readonly exposedCommSeconds: number;
  /** Per device (by rank): the arena `fsm run` allocates for it (memory[p].runtime) when compile laid it out,
   *  else its program's memory-plan arena. */
  readonly peakMemoryBytes: readonly number[];
  /** Per device: persistent weights, gradients and optimizer state it holds. */
  readonly modelStateBytes: readonly number[];
  readonly tokensPerSecond: number;
  /** Model FLOPs (forward + backward, no recompute) per second ÷ peak FLOP/s of all devices. */
  readonly mfu: number;
  readonly flopsPerStep: number;
}

/** Whether compile laid out every program's runtime arenas (memory[p].runtime), which the plan then predicts. */
export function arenasLaidOut(plan: Plan): boolean {
  return plan.memory.every((m) => m.runtime !== undefined);
}

/** The mesh rank of tensor rank 0 of (pipe, data): the rank a program lists for that replica. */
export function meshRank(mesh: { readonly dataParallel: number; readonly tensorParallel: number }, pipe: number, data: number): number {
  return (pipe * mesh.dataParallel + data) * mesh.tensorParallel;
}

/** Ranks of each FSDP shard group of stage k: the plan's shard group under hybrid sharding, else the whole
 *  data-parallel group (every other strategy's group). */
export function shardGroupOf(plan: Pick<Plan, "settings" | "shard">, k: number): number {
  const shard = plan.shard[k]!;
  return shard.strategy === "fsdp" ? plan.settings.shardGroup ?? shard.ranks.length : shard.ranks.length;
}
