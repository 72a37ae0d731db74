// The ViewModel: everything `fsm viz` shows, as plain data built once from a plan (and a measured trace);
// the text, DOT, SVG and HTML renderers only lay it out. Times are seconds from the start of the step.
import type { PlanSearch, PlanSearchCandidate } from "../plan/plan.js";
import type { StageSummary } from "../plan/summary.js";

export interface ViewModel {
  readonly title: string;
  /** One line: pipeline × data parallel, schedule, micro-batches, shard strategy, precision. */
  readonly settings: string;
  readonly summary: Summary;
  readonly stages: readonly StageRow[];
  readonly layerGroups: readonly LayerGroup[];
  /** Data flow between layer groups (forward), by index into layerGroups. */
  readonly edges: readonly GroupEdge[];
  readonly shards: readonly ShardGroup[];
  readonly predicted: Timeline;
  readonly measured?: Timeline;
  readonly memory: readonly MemoryCurve[];
  readonly alternatives?: Alternatives;
}

export interface Summary {
  readonly model: string;
  readonly parameters: number;
  readonly profile: string;
  readonly devices: number;
  readonly nodes: number;
  readonly stepSeconds: number;
  readonly bubbleFraction: number;
  readonly exposedCommSeconds: number;
  /** The fullest device's arena, and which rank that is (the lowest one on a tie). */
  readonly peakMemoryBytes: number;
  readonly peakRank: number;
  readonly capacityBytes: number;
  readonly mfu: number;
  readonly tokensPerSecond: number;
  readonly flopsPerStep: number;
  /** Ranks of each tensor-parallel group (1: none). */
  readonly tensorParallel: number;
}

/** A stage as `fsm compile`'s summary names it, plus what the page draws of it. */
export interface StageRow extends Pick<StageSummary, "stage" | "pipeRank" | "layers" | "firstLayer" | "lastLayer"> {
  /** Every device running the stage: each replica's whole tensor-parallel group. */
  readonly ranks: readonly number[];
  readonly parameters: number;
  /** Model FLOPs one device of the stage runs per step (forward + backward, every micro-batch). */
  readonly flopsPerDevice: number;
  /** Predicted busy compute time of the stage's actions per step. */
  readonly computeSeconds: number;
  /** Its program's arena (what each of its devices allocates) and the most bytes live at once. */
  readonly arenaBytes: number;
  readonly peakBytes: number;
  /** The arena `fsm run` allocates on its fullest device, when compile laid it out (plan.memory[p].runtime). */
  readonly runArenaBytes?: number;
  /** Persistent weights, gradients and optimizer state on its fullest device. */
  readonly modelStateBytes: number;
}

/** One box of the model graph: one layer, or a run of consecutive repeated layers of one stage. */
export interface LayerGroup {
  readonly first: number;
  readonly last: number;
  /** `wte`, or `layers.3 .. layers.40 (38 blocks)`. */
  readonly label: string;
  readonly names: readonly string[];
  readonly stage: number;
  readonly parameters: number;
  readonly flops: number;
  /** FSDP units of the stage holding these layers' parameters (empty unless shard = fsdp). */
  readonly units: readonly number[];
  /** `lm_head.weight = wte.weight`: weights this group uses that another layer declares. */
  readonly tied: readonly string[];
}

export interface GroupEdge {
  readonly from: number;
  readonly to: number;
  /** Crosses a stage boundary (a pipeline send). */
  readonly crossStage: boolean;
}

export interface ShardGroup {
  readonly stage: number;
  readonly strategy: string;
  /** The data-parallel group of tensor rank 0 (the plan's shard group); tensor rank t's is each rank + t. */
  readonly ranks: readonly number[];
  /** Who the group is, as a phrase after `over`: `ranks 0-1`, or with tensor parallelism which tensor rank. */
  readonly over: string;
  /** What each group rank holds, one sentence shared by the ranks it applies to (`fsdp`: each its slice). */
  readonly holds: string;
  readonly members: readonly ShardMember[];
  /** Tensor-parallel plans: what each rank of a tensor-parallel group holds of the stage's parameters. */
  readonly tensor?: TensorShard;
}

export interface TensorShard {
  readonly degree: number;
  /** Each replica's group: ranks r..r+degree−1, tensor rank t being r + t. */
  readonly groups: readonly (readonly number[])[];
  /** What each rank of a group holds, one sentence. */
  readonly holds: string;
  /** The stage's parameters, a collapsed run of repeated blocks listing its first block's once. */
  readonly params: readonly TensorParam[];
}

export interface TensorParam {
  /** `wte.weight`, `layers.0 .. layers.1: attn.qkv.weight` (a run of blocks), `lm_head.weight = wte.weight` (tied). */
  readonly name: string;
  /** The whole parameter's shape, `96×32`. */
  readonly shape: string;
  /** `rows of each of 3 blocks split 2 ways`, or `replicated` (every rank of the group holds it whole). */
  readonly split: string;
  /** What each tensor rank holds, by tensor rank (`rows 0..31 of 64`); empty when replicated. */
  readonly slices: readonly string[];
}

export interface ShardMember {
  readonly rank: number;
  /** The devices holding these bytes: the rank and the rest of its tensor-parallel group (each its own
   *  slices of the split parameters); just the rank without tensor parallelism. */
  readonly devices: readonly number[];
  readonly groupRank: number;
  readonly paramBytes: number;
  readonly gradBytes: number;
  readonly optimizerBytes: number;
  /** oss/sddp: the parameters whose optimizer state (and, for sddp, gradient) it owns; fsdp: its element
   *  range of every unit; none: empty (it holds everything). */
  readonly owns: readonly string[];
}

export type BlockKind = "forward" | "backward" | "weight" | "recompute" | "send" | "recv" | "collective" | "optimizer" | "other";

export interface Block {
  readonly kind: BlockKind;
  /** Short, drawn inside the block when it fits: `F3`, `B3`, `send F3`, `AG u1`, `opt`. */
  readonly label: string;
  readonly stage?: number;
  readonly mb?: number;
  readonly start: number;
  readonly end: number;
  /** One line for hover: the action, its times, what it moves. */
  readonly details: string;
  /** Predicted compute of a tensor-parallel plan: the seconds of it its tensor-parallel collectives take by
   *  the cost model (absent when none). */
  readonly tpSeconds?: number;
}

export interface Lane {
  readonly stream: "compute" | "comm";
  readonly blocks: readonly Block[];
  /** Compute lane: the idle stretches between its blocks (the pipeline bubbles); comm lane: none. */
  readonly idle: readonly { readonly start: number; readonly end: number }[];
}

export interface TimelineRow {
  /** Predicted: the program; measured: the program of the device(s). */
  readonly program: number;
  /** Measured rows: the device drawn (a program's first rank when replicas are aggregated). */
  readonly device?: number;
  /** `ranks 0-31` or `rank 2`. */
  readonly label: string;
  readonly stages: readonly number[];
  readonly lanes: readonly [Lane, Lane];
}

export interface Timeline {
  readonly kind: "predicted" | "measured";
  /** `predicted step 756.2 µs` or `measured step 2 of 2: 1.2 ms`. */
  readonly caption: string;
  readonly stepSeconds: number;
  readonly rows: readonly TimelineRow[];
}

export interface MemoryCurve {
  readonly program: number;
  readonly label: string;
  readonly stages: readonly number[];
  /** Live bytes from each time on, at every change, starting at [0, bytes at 0]. */
  readonly points: readonly (readonly [number, number])[];
  readonly maxBytes: number;
  /** The plan's own figures: most bytes live (its layout's count) and the arena. */
  readonly planPeakBytes: number;
  readonly arenaBytes: number;
  readonly capacityBytes: number;
}

/** The search's record (plan.search), as the page lists it. */
export interface Alternatives extends Pick<PlanSearch, "chosen" | "neighbors" | "families"> {
  /** Each candidate's best step estimate (simulated, else estimated) and memory. */
  readonly candidates: readonly (Pick<PlanSearchCandidate, "settings" | "status" | "reason"> & { readonly stepSeconds: number; readonly memoryBytes: number })[];
}
