// lower(plan, graph, ranks): a plan's training step lowered into device programs for the ranks this process
// runs (one compute and one communication stream per device, each with its own arena): every device runs its
// program's actions for its own replica, in an order consistent with the plan's dependencies and predicted
// times —
//   - compute actions (F, R, B, I, W) run their stage's ops; R and layer-level checkpointing recompute the
//     forward into fresh slots, so the first forward's values die early as the plan's memory model assumes;
//   - SEND/RECV move the stage boundary tensors (and their gradients back) through the communicator;
//   - the shard actions do what the strategy says with flat buffers whose parameters are views:
//       none   gradients summed over micro-batches in place, all-reduced per bucket, every replica steps;
//       oss    the same all-reduce, each rank steps only the parameters it owns, then broadcasts them;
//       sddp   each micro-batch's bucket reduced to its owner, which sums and steps it, then broadcasts;
//       fsdp   each unit all-gathered from its shards before use, each micro-batch's gradient
//              reduce-scattered into the rank's shard, the optimizer run on the shard;
//     tied weights' partial gradients all-reduced across their holder stages, and the gradient norm for
//     clipping all-reduced over every device (each element counted once).
// Gradients are averaged over replicas and micro-batches (× 1/(dp·m)) before clipping, as the 1-device plan
// does, so a plan computes the 1-device plan's losses and weights up to float rounding.
import type { Graph, ParamSplit, TensorId } from "../graph/graph.js";
import { wholeShape } from "../graph/param-split.js";
import { numel } from "../graph/dim.js";
import { isFloatDType } from "../graph/types.js";
import { concreteShape } from "../interp/run.js";
import { concreteAttrs } from "../native/kernels.js";
import { shardGroupOf, type Plan, type PlanAction, type PlanProgram, type PlanUnit } from "../plan/plan.js";
import { actionFromText, type Action } from "../schedule/action.js";
import { programPieces, type ActionPiece } from "./action-order.js";
import { lowerOptimizer, type OptimizerLowering, type UpdateItem } from "./optimizer.js";
import { BYTES, COMM, COMPUTE, DeviceBuilder, type DeviceProgram, type SlotBudget, type SlotDType } from "./device-program.js";
import { gradRoutes, type GradRoutes } from "./grad-routes.js";
import { COMMUNICATOR_OPS, lowerTensorParallelOp, type TensorPlace } from "./tensor-parallel.js";
import { partsOf } from "../graph/ops/tensor-parallel-rules.js";
import { sequenceSymbol } from "../graph/sequence.js";

/** Where a piece of a parameter lives: elements [from, from + count) of the parameter at element `at` of
 *  a slot of a device. */
export interface ParamPiece {
  readonly device: number;
  readonly slot: number;
  /** f32: the weights the optimizer steps (fp32 master weights under mixed precision); bf16/f16: the
   *  16-bit copy the forward and backward compute with. */
  readonly dtype: SlotDType;
  readonly param: string;
  readonly from: number;
  readonly count: number;
  readonly at: number;
}

export interface ClusterProgram {
  /** The global ranks lowered (this process's), ascending; every per-device array below is indexed like it
   *  (local index i is rank ranks[i]), while records naming a `device` give its global rank. */
  readonly ranks: readonly number[];
  readonly devices: readonly DeviceProgram[];
  /** Per device: its data-parallel replica, and per micro-batch the slot of each model input it reads. */
  readonly inputs: readonly { readonly replica: number; readonly slots: readonly Readonly<Record<string, number>>[] }[];
  /** Every slot holding parameter values at the start of a step (all replicas, all shards). */
  readonly paramPieces: readonly ParamPiece[];
  /** Per parameter the lowered ranks hold whole between them: per tensor rank (one list for a parameter not
   *  split by tensor parallelism), pieces that, concatenated, give that rank's value (read back after a step);
   *  a split parameter's ranks' values are joined by its split. */
  readonly paramReaders: ReadonlyMap<string, { readonly ranks: readonly (readonly ParamPiece[])[]; readonly split?: ParamSplitInfo }>;
  /** Ranks of each tensor-parallel group: device d is rank d mod tensorParallel of its group. */
  readonly tensorParallel: number;
  /** The parameters a tensor-parallel rank holds a slice of, however many of the group's ranks this process
   *  runs (its pieces are of that slice). */
  readonly paramSplits: ReadonlyMap<string, ParamSplitInfo>;
  /** The loss of every (replica, micro-batch) the lowered ranks compute, replica-major. */
  readonly lossSlots: readonly { readonly replica: number; readonly mb: number; readonly device: number; readonly slot: number }[];
  /** Per device: the optimizer state that persists between steps (checkpoint.ts names and saves it). */
  readonly optimizerState: readonly OptimizerLowering["state"][];
  /** fp16 loss scaling, per device: the slots holding the scale S (the loss gradient's seed) and 1/S, and
   *  the step's overflow flag (nonzero: some gradient was not finite, so the update was skipped). */
  readonly lossScaling?: readonly { readonly scale?: number; readonly inverse: number; readonly overflow: number }[];
}

type Strategy = "none" | "oss" | "sddp" | "fsdp";

/** A tensor-parallel split parameter: how it is split and its whole shape. */
export interface ParamSplitInfo {
  readonly split: ParamSplit;
  readonly shape: readonly number[];
}

/** How the devices that run the program compute. */
export interface DeviceLoweringOptions {
  /** Their kernels read and write 16-bit operands directly (CUDA's), computing in f32 inside: mixed-precision
   *  values stay 16-bit from op to op. Otherwise (the CPU's) every 16-bit operand is widened into an f32
   *  temporary first and every 16-bit result narrowed from one. */
  readonly kernels16?: boolean;
}

/** Ops whose float operands must share one storage type (one cuBLAS product of two of them), with the
 *  operand positions that take part: an f32 operand among 16-bit ones (a model input) is narrowed first. */
const SAME_TYPE_OPERANDS: Readonly<Record<string, readonly number[]>> = {
  matmul: [0, 1],
  linear: [0, 1],
  linear_grad_input: [0, 1],
  linear_grad_weight: [0, 1],
  // x · W_qkvᵀ is attention's first product (operands x, W_qkv, ...; the gradient's dy, x, W_qkv, ...).
  attention: [0, 1],
  attention_grad_input: [1, 2],
};

/** The local index of global rank `rank` in a lowered program (an error if this process does not run it). */
export function localIndex(program: Pick<ClusterProgram, "ranks">, rank: number): number {
  const i = program.ranks.indexOf(rank);
  if (i < 0) throw new Error(`internal: rank ${rank} is not one of this process's ranks [${program.ranks.join(", ")}]`);
  return i;
}

/** Lowers the step for `ranks` (default: every rank of the plan). Each device's program depends only on the
 *  plan and its rank, so any subset lowers to the same programs the whole world would. */
export function lower(plan: Plan, g: Graph, ranks: readonly number[] = Array.from({ length: plan.cluster.devices }, (_, r) => r), budget?: SlotBudget, options: DeviceLoweringOptions = {}): ClusterProgram {
  if (ranks.length === 0 || ranks.some((r, i) => !Number.isInteger(r) || r < 0 || r >= plan.cluster.devices || (i > 0 && r <= ranks[i - 1]!))) {
    throw new Error(`internal: lower() takes ascending distinct ranks of the plan's ${plan.cluster.devices} devices, got [${ranks.join(", ")}]`);
  }
  const local = new Map(ranks.map((r, i) => [r, i]));
  const routes = gradRoutes(g, plan.stages);
  const devices: DeviceProgram[] = new Array(ranks.length);
  const builders: DeviceBuilder[] = new Array(ranks.length);
  const inputs: ClusterProgram["inputs"][number][] = new Array(ranks.length);
  const pieces: ParamPiece[] = [];
  const readers = new Map<string, { ranks: ParamPiece[][]; split?: ParamSplitInfo }>();
  const losses: { replica: number; mb: number; device: number; slot: number }[] = [];
  const scaling: { scale?: number; inverse: number; overflow: number }[] = new Array(ranks.length);
  const optimizerState: OptimizerLowering["state"][] = new Array(ranks.length);
  // Layers recomputed inside their own backward: @checkpoint ones and the search's selective choice.
  const recomputeLayers = new Set([...(plan.settings.recomputeLayers ?? []), ...g.layers().filter((l) => l.annotations.checkpoint).map((l) => l.index)]);
  // A program lists tensor rank 0 of each replica's group; its other ranks follow it (plan.ts meshRank).
  const tp = plan.settings.tensorParallel;
  for (const program of plan.programs) {
    const devicesOf = (first: number): number[] => Array.from({ length: tp }, (_, t) => first + t);
    if (!program.ranks.some((r) => devicesOf(r).some((d) => local.has(d)))) continue;
    const order = programPieces(program, routes, recomputeLayers);
    program.ranks.forEach((first, replica) => {
      devicesOf(first).forEach((device, t) => {
        const i = local.get(device);
        if (i === undefined) return;
        const lowered = new DeviceLowering(plan, g, routes, program, device, replica, { rank: t, group: devicesOf(first), rowStats: new Map() }, budget, options);
        for (const piece of order) lowered.piece(piece);
        builders[i] = lowered.b;
        inputs[i] = { replica, slots: lowered.inputSlots };
        if (lowered.scaling) scaling[i] = lowered.scaling;
        optimizerState[i] = lowered.optimizerState;
        for (const x of lowered.pieces) pieces.push(x);
        // Every rank of a group computes the same loss: tensor rank 0's is the replica's.
        if (t === 0) for (const l of lowered.losses) losses.push({ replica, ...l, device });
      });
    });
  }
  // Laid out once every device is built, so that a budget a later device exceeds has cost no layout (a deep
  // model's first device laid out, then dropped: gpt-tiny with 2,000 layers, 5 s).
  builders.forEach((b, i) => (devices[i] = b.finish()));
  // To read a parameter back: pieces that tile it from its first element, the longest first (a full copy
  // beats shards; replicas hold equal values, so any will do). Grouped by parameter first: one filter of
  // every piece per parameter is quadratic in a deep model's parameters.
  // A split parameter's pieces are grouped by tensor rank too: each rank holds a different slice.
  const f32Pieces = new Map<string, ParamPiece[]>();
  for (const x of pieces) {
    if (x.dtype !== "f32") continue;
    const key = g.param(x.param)!.split ? `${x.param}#${x.device % tp}` : x.param;
    const list = f32Pieces.get(key);
    if (list) list.push(x);
    else f32Pieces.set(key, [x]);
  }
  const splits = new Map<string, ParamSplitInfo>();
  for (const p of g.params()) {
    if (p.split) splits.set(p.name, { split: p.split, shape: wholeShape(concreteShape(p.type.shape, {}), p.split) });
  }
  for (const p of g.params()) {
    const total = numel(p.type.shape);
    const lists = (p.split ? Array.from({ length: tp }, (_, t) => `${p.name}#${t}`) : [p.name]).map((key) => {
      const mine = (f32Pieces.get(key) ?? []).sort((a, b) => a.from - b.from || b.count - a.count || a.device - b.device);
      const list: ParamPiece[] = [];
      for (let at = 0; at < total; ) {
        const next = mine.find((x) => x.from === at);
        if (!next) break;
        list.push(next);
        at += next.count;
      }
      return list;
    });
    // A parameter every rank holds a piece of is whole only over the whole world.
    const whole = lists.every((list) => list.reduce((n, x) => n + x.count, 0) === total);
    const split = splits.get(p.name);
    if (whole) readers.set(p.name, { ranks: lists, ...(split && { split }) });
    else if (ranks.length === plan.cluster.devices) throw new Error(`internal: no device holds every element of parameter '${p.name}'`);
  }
  losses.sort((a, b) => a.replica - b.replica || a.mb - b.mb);
  const lossScaling = plan.settings.precision === "fp16" ? { lossScaling: scaling } : {};
  return { ranks: [...ranks], devices, inputs, paramPieces: pieces, paramReaders: readers, tensorParallel: tp, paramSplits: splits, lossSlots: losses, optimizerState, ...lossScaling };
}

/** One device's lowering: its slots, value maps and the strategy's buffers, fed the program's actions. */
class DeviceLowering {
  readonly b: DeviceBuilder;
  readonly inputSlots: Record<string, number>[] = [];
  readonly pieces: ParamPiece[] = [];
  readonly losses: { mb: number; slot: number }[] = [];
  private readonly values: Map<TensorId, number>[] = [];
  private readonly bindings: Record<string, number>;
  private readonly strategy: Strategy[];
  /** Full parameter slots (none/oss/sddp) by stage. */
  private readonly paramSlots = new Map<number, Map<string, number>>();
  /** fsdp: per stage, per unit: the shard slot, and the views of the gather in use. */
  private readonly shards = new Map<number, Map<number, number>>();
  private readonly gathered = new Map<string, { action: number; views: Map<string, number> }>();
  /** Gradient buffers: accumulators (per stage, per param view), per-micro-batch flat buffers. */
  private readonly acc = new Map<string, number>();
  private readonly accFlat = new Map<string, number>();
  private readonly mbFlat = new Map<string, { slot: number; views: Map<string, number> }>();
  /** fsdp: per stage and unit, the instruction of its latest reduce-scatter. */
  private readonly lastReduceScatter = new Map<string, number>();
  private readonly units = new Map<number, Map<string, PlanUnit>>();
  private readonly started = new Set<string>();
  /** Ops whose gradient output was placed where it belongs (nothing to accumulate after them). */
  private readonly direct = new Set<number>();
  private readonly items = new Map<number, UpdateItem[]>();
  private readonly tail: ReturnType<typeof lowerOptimizer>;
  /** Storage type of float values: f32, or the 16-bit type of mixed precision (kernels compute in f32). */
  private readonly half: SlotDType;
  /** Kernels take 16-bit operands as they are (DeviceLoweringOptions.kernels16); else they are widened and narrowed. */
  private readonly direct16: boolean;
  /** fsdp under mixed precision: per stage and unit, the 16-bit copy of the rank's shard that is gathered. */
  private readonly computeShards = new Map<string, number>();
  /** fp16: this device's loss-scaling slots (see ClusterProgram.lossScaling). */
  scaling: { scale?: number; inverse: number; overflow: number } | undefined;
  /** fp16: the graph's loss-gradient seed (fill 1), replaced by the loss scale. */
  private readonly seed: number | undefined;

  constructor(
    private readonly plan: Plan,
    private readonly g: Graph,
    private readonly routes: GradRoutes,
    private readonly program: PlanProgram,
    private readonly device: number,
    private readonly replica: number,
    private readonly tensor: TensorPlace,
    budget: SlotBudget | undefined,
    options: DeviceLoweringOptions,
  ) {
    this.b = new DeviceBuilder(budget);
    const { microBatches: m, microBatchSize: mbs, seq } = plan.settings;
    this.bindings = seq === null ? { B: mbs } : { B: mbs, S: sequenceSymbol(g, seq) };
    for (let j = 0; j < m; j++) {
      this.values.push(new Map());
      this.inputSlots.push({});
    }
    this.strategy = plan.shard.map((s) => (s.ranks.length === 1 ? "none" : (s.strategy as Strategy)));
    this.half = plan.settings.precision === "bf16" ? "bf16" : plan.settings.precision === "fp16" ? "f16" : "f32";
    this.direct16 = options.kernels16 === true && this.half !== "f32";
    if (plan.settings.precision === "fp16") {
      this.scaling = { inverse: this.b.pin(this.b.slot([])), overflow: this.b.pin(this.b.slot([])) };
      const seeds = g.ops().filter((o) => o.op === "fill" && o.phase === "backward" && o.attrs.value === 1 && g.tensor(o.outputs[0]!).type.shape.length === 0);
      if (seeds.length !== 1) throw new Error(`not implemented: fp16 loss scaling needs exactly one loss-gradient seed, the graph has ${seeds.length}`);
      this.seed = seeds[0]!.id;
    }
    for (const k of program.stages) this.placeParams(k);
    this.tail = lowerOptimizer(this.b, g, plan, this.items, {
      ...(this.scaling && { scaling: this.scaling }),
      gradSlot: (item) => (item.grad >= 0 ? item.grad : this.accumulator(item.stage, item.params[0]!)),
      everyGradient: () => this.everyGradient(),
    });
  }

  private shapeOf(t: TensorId): number[] {
    return concreteShape(this.g.tensor(t).type.shape, this.bindings);
  }

  private paramShape(name: string): number[] {
    return this.shapeOf(this.g.param(name)!.tensor);
  }

  /** Parameter storage for stage k, the pieces to fill it from, and its optimizer items. */
  private placeParams(k: number): void {
    const shard = this.plan.shard[k]!;
    const strategy = this.strategy[k]!;
    const r = this.replica;
    // A gradient element is counted in the norm once: on its first holder stage, and for a parameter every
    // rank of a tensor-parallel group holds whole, on tensor rank 0 (a split one's slices are all distinct).
    const firstHolder = (p: string): boolean => (this.routes.holders.get(p)?.[0] ?? k) === k && (this.tensor.rank === 0 || this.g.param(p)!.split !== undefined);
    const items: UpdateItem[] = [];
    if (strategy === "fsdp") {
      // Under hybrid sharding replicas r, r + s, ... of a shard group of s hold the same shard; the first
      // group's count it in the norm.
      const shardGroup = shardGroupOf(this.plan, k);
      const byUnit = new Map<number, number>();
      for (const u of shard.units) {
        const slot = this.b.pin(this.b.slot([u.shardNumel]));
        byUnit.set(u.index, slot);
        const copy = this.half === "f32" ? undefined : this.b.pin(this.b.slot([u.shardNumel], this.half));
        if (copy !== undefined) this.computeShards.set(`${k}:${u.index}`, copy);
        const lo = (r % shardGroup) * u.shardNumel;
        const hi = lo + u.shardNumel;
        const norm: { at: number; count: number }[] = [];
        for (const [name, offset, count] of u.params) {
          const a = Math.max(lo, offset);
          const z = Math.min(hi, offset + count);
          if (a < z) {
            this.pieces.push({ device: this.device, slot, dtype: "f32", param: name, from: a - offset, count: z - a, at: a - lo });
            if (copy !== undefined) this.pieces.push({ device: this.device, slot: copy, dtype: this.half, param: name, from: a - offset, count: z - a, at: a - lo });
            if (firstHolder(name) && r < shardGroup) norm.push({ at: a - lo, count: z - a });
          }
        }
        items.push({ stage: k, params: u.params.map(([n]) => n), param: slot, ...(copy !== undefined && { copy }), shape: [u.shardNumel], grad: -1, key: `u${k}:${u.index}`, norm });
      }
      this.shards.set(k, byUnit);
      const held = new Set(shard.units.flatMap((u) => u.params.map(([n]) => n)));
      for (const p of this.routes.params[k]!) if (!held.has(p)) throw new Error(`internal: stage ${k}'s parameter '${p}' is in no FSDP unit`);
      this.items.set(k, items);
      return;
    }
    const slots = new Map<string, number>();
    // oss/sddp broadcast buckets are flat buffers of their parameters, so one broadcast moves a bucket.
    for (const bucket of strategy === "none" ? [] : shard.broadcastBuckets) {
      const flat = this.b.pin(this.b.slot([bucket.numel], this.half));
      this.accFlat.set(`p${k}:${bucket.index}`, flat);
      let at = 0;
      for (const name of bucket.params) {
        const shape = this.paramShape(name);
        slots.set(name, this.b.view(flat, at, shape));
        at += shape.reduce((x, y) => x * y, 1);
      }
    }
    for (const name of this.routes.params[k]!) {
      if (!slots.has(name)) slots.set(name, this.b.pin(this.b.slot(this.paramShape(name), this.half)));
      const slot = slots.get(name)!;
      const count = this.paramShape(name).reduce((x, y) => x * y, 1);
      this.pieces.push({ device: this.device, slot, dtype: this.half, param: name, from: 0, count, at: 0 });
      const owned = strategy === "none" || shard.owners[name] === r;
      if (!owned) continue;
      // Under mixed precision the owner also keeps fp32 master weights: the optimizer steps them and
      // refreshes the 16-bit copy.
      const master = this.half === "f32" ? slot : this.b.pin(this.b.slot(this.paramShape(name)));
      if (master !== slot) this.pieces.push({ device: this.device, slot: master, dtype: "f32", param: name, from: 0, count, at: 0 });
      const norm = (strategy === "none" ? r === 0 : true) && firstHolder(name) ? [{ at: 0, count }] : [];
      items.push({ stage: k, params: [name], param: master, ...(master !== slot && { copy: slot }), shape: this.paramShape(name), grad: -1, key: `p${k}:${name}`, norm });
    }
    this.paramSlots.set(k, slots);
    this.items.set(k, items);
  }

  /** Every gradient sum this device holds, when it holds all of its stages' in full (replicated
   *  parameters on one stage: the plan needs no gradient-norm all-reduce, so the norm is computed here). */
  private everyGradient(): number[] {
    const stages = this.program.stages;
    if (stages.length !== 1 || (this.strategy[stages[0]!] !== "none" && this.strategy[stages[0]!] !== "oss")) {
      throw new Error(`internal: device ${this.device} clips without a gradient-norm all-reduce but does not hold every gradient`);
    }
    return this.routes.params[stages[0]!]!.map((p) => this.accumulator(stages[0]!, p));
  }

  get optimizerState(): OptimizerLowering["state"] {
    return this.tail.state;
  }

  /** Per plan action, and per (action, layer) of a compute action: its last compute instruction so far. */
  private readonly lastCompute = new Map<string, number>();
  /** Per plan action: its last communication instruction so far. */
  private readonly lastComm = new Map<number, number>();
  /** Plan actions and their layer runs (keyed as lastCompute) whose first instruction has been emitted. */
  private readonly begun = new Set<string>();

  /** Lowers one piece of the program: a layer's run of a compute action, or a whole other action. */
  piece(piece: ActionPiece): void {
    const from = this.b.length;
    this.lower(piece);
    const id = piece.action.id;
    let compute = false;
    let comm = false;
    for (let i = this.b.length - 1; i >= from && !(compute && comm); i--) {
      if (this.b.streamOf(i) === COMPUTE && !compute) {
        compute = true;
        this.lastCompute.set(`${id}`, i);
        if (piece.layer !== undefined) this.lastCompute.set(`${id}:${piece.layer}`, i);
      } else if (this.b.streamOf(i) === COMM && !comm) {
        comm = true;
        this.lastComm.set(id, i);
      }
    }
    if (from === this.b.length) return;
    if (!this.begun.has(`${id}`)) {
      this.begun.add(`${id}`);
      this.afterDeps(piece.action, from);
    }
    if (piece.layer !== undefined && !this.begun.has(`${id}:${piece.layer}`)) {
      this.begun.add(`${id}:${piece.layer}`);
      this.afterGates(piece.action, piece.layer, from);
    }
  }

  /** A layer's first instruction waits for the collectives the plan gates that layer on: a unit's gather
   *  (which its data also says) or a collective whose freed bytes the plan lets the layer reuse. */
  private afterGates(a: PlanAction, layer: number, from: number): void {
    const on = (a.gates ?? []).filter(([l]) => l === layer).map(([, x]) => this.lastComm.get(x));
    const latest = Math.max(-1, ...on.filter((i): i is number => i !== undefined));
    let first = from;
    while (first < this.b.length && this.b.streamOf(first) !== COMPUTE) first++;
    if (latest >= 0 && latest < first && first < this.b.length) this.b.waitAlso(first, latest);
  }

  /** An action's first instruction waits for what the plan makes it wait for on the other stream: a
   *  compute action for the sends and collectives it depends on (the plan reuses their bytes from then), a
   *  transfer or collective for the compute it depends on (an all-gather also for its partial points: the
   *  prefetch depth the plan priced). So every buffer lives the window the plan's memory plan gives it,
   *  rather than a receive posted at the step's start or a sent value kept until the stream next syncs. */
  private afterDeps(a: PlanAction, first: number): void {
    const onCompute = this.b.streamOf(first) === COMM;
    const on = a.deps.map((d) => (onCompute ? this.lastCompute.get(`${d}`) : this.lastComm.get(d)));
    if (onCompute) on.push(...(a.partial ?? []).map(([x, layer]) => this.lastCompute.get(`${x}:${layer}`) ?? this.lastCompute.get(`${x}`)));
    const latest = Math.max(-1, ...on.filter((i): i is number => i !== undefined));
    if (latest >= 0) this.b.waitAlso(first, latest);
  }

  private lower(piece: ActionPiece): void {
    const a = piece.action;
    const act = actionFromText(a.text);
    switch (act.kind) {
      case "F":
      case "R":
      case "B":
      case "I":
      case "W":
        return this.run(act.stage, act.mb!, piece.ops ?? [], a.text);
      case "SEND_F":
      case "SEND_B":
      case "RECV_F":
      case "RECV_B":
        return this.p2p(act, a.text);
      case "ALL_GATHER":
        return this.allGather(act, a);
      case "FREE":
        return this.free(act, a);
      case "REDUCE_SCATTER":
        return this.reduceScatter(act, a.text);
      case "REDUCE":
        return this.reduce(act, a.text);
      case "BROADCAST":
        return this.broadcast(act, a.text);
      case "ALL_REDUCE":
        return this.allReduce(act, a);
      case "OPTIMIZER":
        return this.tail.optimizer(act.stage, a.text);
    }
  }

  /** Stage k's data-parallel group as this device's collectives take it, on this device's tensor rank:
   *  `all` its replicas; under hybrid sharding `shard` the shard group this replica is in (consecutive group
   *  ranks) and `replicas` the holders of the same shard in the other shard groups. */
  private group(k: number, which: "all" | "shard" | "replicas" = "all"): number[] {
    const shard = this.plan.shard[k]!;
    const size = shardGroupOf(this.plan, k);
    const mine = this.replica % size;
    const block = this.replica - mine;
    const ranks =
      which === "all" ? shard.ranks : which === "shard" ? shard.ranks.slice(block, block + size) : shard.ranks.filter((_, i) => i % size === mine);
    return ranks.map((r) => r + this.tensor.rank).sort((x, y) => x - y);
  }

  // ---- compute ------------------------------------------------------------------------------------------

  /** The slot a compute op reads for tensor t of micro-batch j on stage k. */
  private read(k: number, j: number, t: TensorId, text: string): number {
    const info = this.g.tensor(t);
    if (info.kind === "param") return this.paramSlot(k, info.name, text);
    if (info.kind === "input") {
      const named = this.inputSlots[j]!;
      named[info.name] ??= this.b.pin(this.b.slot(this.shapeOf(t), isFloatDType(info.type.dtype) ? "f32" : "i32"));
      return named[info.name]!;
    }
    const s = this.values[j]!.get(t);
    if (s === undefined) throw new Error(`internal: device ${this.device}, action ${text} reads %${t} '${info.name}' before it is computed`);
    return s;
  }

  /** fsdp: the unit of stage k holding parameter `name` (looked up once per stage). */
  private unitOf(k: number, name: string): PlanUnit {
    let byParam = this.units.get(k);
    if (!byParam) {
      byParam = new Map(this.plan.shard[k]!.units.flatMap((u) => u.params.map(([n]) => [n, u] as const)));
      this.units.set(k, byParam);
    }
    const u = byParam.get(name);
    if (!u) throw new Error(`internal: stage ${k}'s parameter '${name}' is in no FSDP unit`);
    return u;
  }

  private paramSlot(k: number, name: string, text: string): number {
    if (this.strategy[k] !== "fsdp") return this.paramSlots.get(k)!.get(name)!;
    const unit = this.unitOf(k, name);
    const gather = this.gathered.get(`${k}:${unit.index}`);
    if (!gather) throw new Error(`internal: device ${this.device}, action ${text} reads '${name}' while FSDP unit ${unit.index} of stage ${k} is not gathered`);
    return gather.views.get(name)!;
  }

  private run(k: number, j: number, ops: readonly { id: number; op: string; inputs: readonly TensorId[]; outputs: readonly TensorId[]; attrs: Parameters<typeof concreteAttrs>[0] }[], text: string): void {
    const contributions = this.routes.contributions[k]!;
    for (const o of ops) {
      // Kernels that compute on f32 operands get a widened temporary of each 16-bit one; 16-bit kernels get
      // them as they are, except an f32 operand of a product whose other operand is 16-bit, which is narrowed.
      const read = o.inputs.map((t) => this.read(k, j, t, text));
      // The tensor-parallel collectives sum and move f32 (the communicator's type): under 16-bit kernels their
      // 16-bit activations are widened and narrowed around them, as every op's are on the CPU.
      const wideOnly = !this.direct16 || (COMMUNICATOR_OPS.has(o.op) && partsOf(o.attrs) > 1);
      const ins = wideOnly ? read.map((s) => this.widen(s, text)) : this.sameType(o.op, read, text);
      const casts: [number, number][] = [];
      const outs = o.outputs.map((t) => {
        const info = this.g.tensor(t);
        const param = contributions.get(t);
        const target = param !== undefined ? this.gradTarget(k, j, param, o.id) : undefined;
        // Gradients of parameters and their partials (accumulated and reduced in f32), the loss and its seed
        // stay f32; other float values are stored in the step's float type.
        const keep = !isFloatDType(info.type.dtype) ? "i32" : param !== undefined || this.routes.gradTensors.has(t) || t === this.g.loss || o.id === this.seed ? "f32" : this.half;
        const s = target ?? this.b.slot(this.shapeOf(t), keep);
        this.values[j]!.set(t, s);
        // The loss as its forward first computes it (a recompute computes it again, unread).
        if (t === this.g.loss && !this.losses.some((l) => l.mb === j)) {
          this.b.pin(s);
          this.losses.push({ mb: j, slot: s });
        }
        if (!wideOnly || this.b.dtype(s) === "f32" || this.b.dtype(s) === "i32") return s;
        const wide = this.b.slot(this.shapeOf(t));
        casts.push([wide, s]);
        return wide;
      });
      // fp16: the loss gradient starts at the loss scale S instead of 1, so small gradients survive in f16.
      if (o.id === this.seed) {
        this.scaling!.scale ??= this.b.pin(this.b.slot([]));
        this.b.emit(COMPUTE, "fsm_copy", [this.scaling!.scale], outs, {}, text);
      } else if (!lowerTensorParallelOp(this.b, this.tensor, o.op, concreteAttrs(o.attrs), ins, outs, text)) this.b.emit(COMPUTE, o.op, ins, outs, concreteAttrs(o.attrs), text);
      for (const [wide, narrow] of casts) this.b.emit(COMPUTE, "fsm_cast", [wide], [narrow], {}, text);
      for (const t of o.outputs) {
        const param = contributions.get(t);
        if (param !== undefined && !this.direct.has(o.id)) this.accumulate(k, param, this.values[j]!.get(t)!, COMPUTE, text);
      }
      this.direct.delete(o.id);
    }
  }

  /** The operands of `op` as a 16-bit kernel takes them: those SAME_TYPE_OPERANDS names narrowed to the
   *  step's 16-bit type when any of them is 16-bit and another is f32. */
  private sameType(op: string, slots: number[], text: string): number[] {
    const at = SAME_TYPE_OPERANDS[op];
    if (!at || !at.some((i) => this.b.dtype(slots[i]!) === this.half) || !at.some((i) => this.b.dtype(slots[i]!) === "f32")) return slots;
    return slots.map((s, i) => {
      if (!at.includes(i) || this.b.dtype(s) !== "f32") return s;
      const narrow = this.b.slot(this.b.shape(s), this.half);
      this.b.emit(COMPUTE, "fsm_cast", [s], [narrow], {}, text);
      return narrow;
    });
  }

  /** A 16-bit slot widened into a fresh f32 temporary (other slots as they are). */
  private widen(slot: number, text: string): number {
    const dtype = this.b.dtype(slot);
    if (dtype !== "bf16" && dtype !== "f16") return slot;
    const wide = this.b.slot(this.b.shape(slot));
    this.b.emit(COMPUTE, "fsm_cast", [slot], [wide], {}, text);
    return wide;
  }

  /** What the f32-only communicator moves for a slot: the slot, or an f32 view of its bits (integer and
   *  16-bit values; 16-bit ones need an even count). */
  private wire(slot: number): number {
    const dtype = this.b.dtype(slot);
    if (dtype === "f32") return slot;
    const shape = this.b.shape(slot);
    const n = shape.reduce((x, y) => x * y, 1);
    if (dtype === "i32") return this.b.view(slot, 0, shape, "f32");
    if (n % 2 !== 0) throw new Error(`not implemented: moving ${n} ${dtype} values (an odd count) through the communicator`);
    return this.b.view(slot, 0, [(n * BYTES[dtype]) / 4], "f32");
  }

  // ---- gradients ----------------------------------------------------------------------------------------

  /** fsdp no_sync on stage k: its units reduce-scattered once per step from one accumulating buffer. */
  private noSync(k: number): boolean {
    return this.strategy[k] === "fsdp" && this.plan.settings.noSync === true;
  }

  /** Whether stage k all-reduces tied parameter p's partial every micro-batch (fsdp, sddp: before the
   *  stage's own reduction) rather than once on the sum. */
  private tiedEachMicroBatch(k: number, p: string): boolean {
    return this.routes.holders.has(p) && (this.strategy[k] === "fsdp" || this.strategy[k] === "sddp");
  }

  /** Where an op writes a gradient of p: sddp/fsdp straight into the micro-batch's flat buffer (a bucket or a
   *  unit); none/oss the first micro-batch's straight into the step's accumulator (undefined: a fresh slot,
   *  added to the accumulator after the op). */
  private gradTarget(k: number, j: number, p: string, op: number): number | undefined {
    const s = this.strategy[k];
    const single = this.routes.partials[k]!.get(p) === 1;
    const key = `${k}:${p}`;
    if (s === "fsdp" || s === "sddp") {
      if (!single) throw new Error(`not implemented: parameter '${p}' has several gradient partials on stage ${k} under ${s}`);
      // no_sync: only the step's first gradient lands in the unit's buffer; later ones are added to it.
      if (this.noSync(k)) {
        if (this.started.has(key)) return undefined;
        this.started.add(key);
      }
      this.direct.add(op);
      return this.mbBuffer(k, j, p).views.get(p)!;
    }
    if (!single || this.started.has(key)) return undefined;
    this.started.add(key);
    this.direct.add(op);
    return this.accumulator(k, p);
  }

  private mbBuffer(k: number, j: number, p: string): { slot: number; views: Map<string, number> } {
    const shard = this.plan.shard[k]!;
    if (this.strategy[k] === "fsdp") {
      const u = this.unitOf(k, p);
      // no_sync: one buffer for the step, every micro-batch accumulating into it.
      const key = `${k}:u${u.index}:${this.noSync(k) ? "step" : j}`;
      if (!this.mbFlat.has(key)) {
        // Zeroed first: padding and any member without a gradient must add nothing to the shards. The fill
        // waits for the unit's previous reduce-scatter, so that micro-batch's buffer is free by then (as the
        // plan's memory model has it) rather than held until the optimizer.
        const slot = this.b.slot([u.paddedNumel]);
        const fill = this.b.emit(COMPUTE, "fill", [], [slot], { value: 0 }, `${k}B${j}`);
        const previous = this.lastReduceScatter.get(`${k}:${u.index}`);
        if (previous !== undefined) this.b.waitAlso(fill, previous);
        this.mbFlat.set(key, { slot, views: new Map(u.params.map(([n, offset]) => [n, this.b.view(slot, offset, this.paramShape(n))])) });
      }
      return this.mbFlat.get(key)!;
    }
    const bucket = shard.gradBuckets.find((x) => x.params.includes(p));
    if (!bucket) throw new Error(`internal: stage ${k}'s parameter '${p}' is in no gradient bucket`);
    const key = `${k}:b${bucket.index}:${j}`;
    if (!this.mbFlat.has(key)) {
      const slot = this.b.slot([bucket.numel]);
      const views = new Map<string, number>();
      let at = 0;
      for (const n of bucket.params) {
        views.set(n, this.b.view(slot, at, this.paramShape(n)));
        at += this.paramShape(n).reduce((x, y) => x * y, 1);
      }
      this.mbFlat.set(key, { slot, views });
    }
    return this.mbFlat.get(key)!;
  }

  /** none/oss: the step's gradient accumulator of p on stage k (a view into its bucket's flat buffer when it
   *  is in a bucket, so one all-reduce moves the bucket). */
  private accumulator(k: number, p: string): number {
    const key = `${k}:${p}`;
    if (this.acc.has(key)) return this.acc.get(key)!;
    // fsdp no_sync: the unit's step buffer, which its reduce-scatter moves once.
    if (this.strategy[k] === "fsdp" && this.noSync(k)) return this.mbBuffer(k, 0, p).views.get(p)!;
    const shard = this.plan.shard[k]!;
    const bucket = shard.ranks.length === 1 ? undefined : shard.gradBuckets.find((x) => x.params.includes(p));
    if (!bucket) {
      this.acc.set(key, this.b.slot(this.paramShape(p)));
      return this.acc.get(key)!;
    }
    const flat = this.b.slot([bucket.numel]);
    let at = 0;
    for (const n of bucket.params) {
      this.acc.set(`${k}:${n}`, this.b.view(flat, at, this.paramShape(n)));
      at += this.paramShape(n).reduce((x, y) => x * y, 1);
    }
    this.accFlat.set(`g${k}:${bucket.index}`, flat);
    return this.acc.get(key)!;
  }

  /** Sums a micro-batch's gradient into p's accumulator: the first one copied, the rest added in place. */
  private accumulate(k: number, p: string, from: number, stream: 0 | 1, text: string): void {
    const into = this.accumulator(k, p);
    const key = `${k}:${p}`;
    if (this.started.has(key)) this.b.emit(stream, "fsm_add_inplace", [into, from], [into], {}, text);
    else {
      this.started.add(key);
      this.b.emit(stream, "fsm_copy", [from], [into], {}, text);
    }
  }

  // ---- point to point -----------------------------------------------------------------------------------

  private tag(edge: number, j: number, dir: 0 | 1, i: number): number {
    return ((j * this.plan.stages.length + edge) * 2 + dir) * 256 + i;
  }

  private p2p(act: Action, text: string): void {
    const k = act.stage;
    const j = act.mb!;
    // The plan names the peer stage's replica 0, tensor rank 0 (meshRank); this device's counterpart there.
    const peer = act.peer! + this.replica * this.plan.settings.tensorParallel + this.tensor.rank;
    const v = this.values[j]!;
    const check = (n: number): void => {
      if (n > 256) throw new Error(`not implemented: more than 256 tensors cross between stages ${k} and its neighbour`);
    };
    if (act.kind === "SEND_F") {
      const sends = this.plan.stages[k]!.sends;
      check(sends.length);
      sends.forEach((t, i) => this.b.emit(COMM, "comm.send", [this.wire(this.read(k, j, t, text))], [], { peer, tag: this.tag(k, j, 0, i) }, text));
    } else if (act.kind === "RECV_F") {
      this.plan.stages[k - 1]!.sends.forEach((t, i) => {
        // Stored as the sender stored it: its storage type follows the same rule on both sides.
        const s = this.b.slot(this.shapeOf(t), isFloatDType(this.g.tensor(t).type.dtype) ? this.half : "i32");
        this.b.emit(COMM, "comm.recv", [], [this.wire(s)], { peer, tag: this.tag(k - 1, j, 0, i) }, text);
        v.set(t, s);
      });
    } else if (act.kind === "SEND_B") {
      const grads = this.routes.gradsBack[k - 1]!;
      check(grads.length);
      grads.forEach((t, i) => this.b.emit(COMM, "comm.send", [this.wire(this.read(k, j, t, text))], [], { peer, tag: this.tag(k - 1, j, 1, i) }, text));
    } else {
      this.routes.gradsBack[k]!.forEach((t, i) => {
        const s = this.b.slot(this.shapeOf(t), this.half);
        this.b.emit(COMM, "comm.recv", [], [this.wire(s)], { peer, tag: this.tag(k, j, 1, i) }, text);
        v.set(t, s);
      });
    }
  }

  // ---- shard collectives --------------------------------------------------------------------------------

  private allGather(act: Action, a: PlanAction): void {
    const k = act.stage;
    const u = this.plan.shard[k]!.units.find((x) => x.index === act.unit)!;
    // Under mixed precision the 16-bit copy of the shard is what travels and what compute reads.
    const shard = this.computeShards.get(`${k}:${u.index}`) ?? this.shards.get(k)!.get(u.index)!;
    const slot = this.b.slot([u.paddedNumel], this.half);
    this.b.emit(COMM, "comm.allGather", [this.wire(shard)], [this.wire(slot)], { group: this.group(k, "shard") }, a.text);
    this.gathered.set(`${k}:${u.index}`, { action: a.id, views: new Map(u.params.map(([n, offset]) => [n, this.b.view(slot, offset, this.paramShape(n))])) });
  }

  private free(act: Action, a: PlanAction): void {
    const key = `${act.stage}:${act.unit}`;
    const g = this.gathered.get(key);
    if (g && a.deps.includes(g.action)) this.gathered.delete(key);
  }

  private reduceScatter(act: Action, text: string): void {
    const k = act.stage;
    const u = this.plan.shard[k]!.units.find((x) => x.index === act.unit)!;
    const p = u.params[0]![0];
    const buf = this.mbBuffer(k, act.mb ?? 0, p);
    const item = this.items.get(k)!.find((x) => x.key === `u${k}:${u.index}`)!;
    // The first micro-batch lands in the shard's accumulator itself; later ones are added to it.
    if (item.grad < 0) {
      item.grad = this.b.slot([u.shardNumel]);
      this.lastReduceScatter.set(`${k}:${u.index}`, this.b.emit(COMM, "comm.reduceScatter", [buf.slot], [item.grad], { group: this.group(k, "shard") }, text));
    } else {
      const tmp = this.b.slot([u.shardNumel]);
      this.lastReduceScatter.set(`${k}:${u.index}`, this.b.emit(COMM, "comm.reduceScatter", [buf.slot], [tmp], { group: this.group(k, "shard") }, text));
      this.b.emit(COMM, "fsm_add_inplace", [item.grad, tmp], [item.grad], {}, text);
    }
  }

  private reduce(act: Action, text: string): void {
    const k = act.stage;
    const bucket = this.plan.shard[k]!.gradBuckets.find((x) => x.index === act.unit)!;
    const buf = this.mbBuffer(k, act.mb!, bucket.params[0]!);
    const root = act.peer! + this.tensor.rank;
    this.b.emit(COMM, "comm.reduce", [buf.slot], [buf.slot], { group: this.group(k), root }, text);
    if (this.device !== root) return;
    for (const p of bucket.params) this.accumulate(k, p, buf.views.get(p)!, COMM, text);
  }

  private broadcast(act: Action, text: string): void {
    const flat = this.accFlat.get(`p${act.stage}:${act.unit}`);
    if (flat === undefined) throw new Error(`internal: device ${this.device}, ${text}: no broadcast bucket ${act.unit}`);
    const wire = this.wire(flat);
    this.b.emit(COMM, "comm.broadcast", [wire], [wire], { group: this.group(act.stage), root: act.peer! + this.tensor.rank }, text);
  }

  private allReduce(act: Action, a: PlanAction): void {
    const k = act.stage;
    const c = a.collective;
    if (!c) throw new Error(`internal: ${a.text} has no collective`);
    if (c.of === "gradNorm") return this.tail.gradNorm(a.text);
    if (c.of === "unit") {
      // Hybrid sharding: the shard groups' reduce-scattered shards summed across the replicas of the shard.
      const item = this.items.get(k)!.find((x) => x.key === `u${k}:${act.unit}`);
      if (!item || item.grad < 0) throw new Error(`internal: device ${this.device}, ${a.text}: unit ${act.unit} of stage ${k} has no reduced gradient shard yet`);
      this.b.emit(COMM, "comm.allReduce", [item.grad], [item.grad], { group: this.group(k, "replicas") }, a.text);
      return;
    }
    if (c.of === "gradBucket") {
      const bucket = this.plan.shard[k]!.gradBuckets.find((x) => x.index === act.unit)!;
      this.accumulator(k, bucket.params[0]!);
      this.b.emit(COMM, "comm.allReduce", [this.accFlat.get(`g${k}:${bucket.index}`)!], [this.accFlat.get(`g${k}:${bucket.index}`)!], { group: this.group(k) }, a.text);
      return;
    }
    if (c.of !== "tiedGrad") throw new Error(`internal: ${a.text}: all-reduce of ${c.of}`);
    const tied = this.plan.shard[k]!.tied.find((x) => x.unit === act.unit);
    if (!tied) throw new Error(`internal: ${a.text}: stage ${k} has no tied weight ${act.unit}`);
    const p = tied.param;
    const group = tied.stages.map((s) => this.plan.stages[s]!.ranks[this.replica]! + this.tensor.rank).sort((x, y) => x - y);
    if (new Set(group).size !== group.length) throw new Error(`not implemented: tied weight '${p}' on two stages of one device`);
    if (this.tiedEachMicroBatch(k, p)) {
      // no_sync: once, on the step's accumulated partial, before the unit's one reduce-scatter.
      if (act.mb === undefined && !this.noSync(k)) throw new Error(`internal: ${a.text}: a per-micro-batch tied all-reduce without a micro-batch`);
      const view = this.mbBuffer(k, act.mb ?? 0, p).views.get(p)!;
      this.b.emit(COMM, "comm.allReduce", [view], [view], { group }, a.text);
    } else {
      const into = this.accumulator(k, p);
      this.b.emit(COMM, "comm.allReduce", [into], [into], { group }, a.text);
    }
  }
}
