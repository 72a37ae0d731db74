// The search's model of one candidate's stages: for a (virtual) stage k holding layers [i, j), its seconds per
// micro-batch and its bytes per device, in O(1) or O(kinds of layers) from prefix sums, so the partitioner
// can ask for every interval. compile's StageCostModel and memory plan compute the same quantities exactly
// for the one split finally chosen; this model must rank splits the way they would.
//
// Seconds of stage k per micro-batch: the larger of its compute stream (forward + backward + recompute of
// its layers) and its comm stream (the collectives that repeat every micro-batch: FSDP's gathers and
// reduce-scatters, ShardedDDP's gradient reduces, the all-reduce of a tied weight's gradient when its other
// holder is on another stage, and the two transfers across its output cut), the two streams overlapping as
// compile's programs overlap them. FSDP's collectives run over its shard group of s ranks (s = d unless
// hybrid); its once-per-step ones (no_sync's reduce-scatters, hybrid sharding's all-reduce of each gradient
// shard over the d/s replica groups) are the step's tail (exposedStepSeconds, priced by step-model.ts).
// Bytes: model state under the shard strategy (ZeRO formulas, FSDP's over s ranks), FSDP's gathered units
// and unsharded gradients, the activations of the micro-batches the schedule keeps in flight on that stage,
// and the transfer buffers.
import type { Optimizer, Precision } from "../check/settings-types.js";
import { collectiveTime, groupLink, type CollectiveKind, type Link } from "../cost/collectives.js";
import type { Cluster } from "../cost/cluster.js";
import { stateBytesPerParam, type StateBytesPerParam } from "../cost/memory.js";
import { meshRank } from "../plan/plan.js";
import { DEFAULT_FSDP_MIN_PARAMS } from "../shard/plan.js";
import type { Candidate } from "./candidate.js";
import { prefix, type LayerTable, type MicroBatchProfile, type MicroBatchTimes } from "./layer-table.js";

const NOTHING: ReadonlyMap<number, number> = new Map();

interface Recompute {
  readonly seconds: number;
  /** Layers to recompute, by kind. */
  readonly take: ReadonlyMap<number, number>;
  /** The stage's bytes once they are recomputed. */
  readonly bytes: number;
  /** Bytes one micro-batch no longer keeps, and the recompute workspace held once. */
  readonly freed: number;
  readonly workspace: number;
}

export interface StageModelInput {
  readonly table: LayerTable;
  readonly profile: MicroBatchProfile;
  readonly cluster: Cluster;
  readonly candidate: Candidate;
  readonly precision: Precision;
  readonly optimizer: Optimizer;
  readonly reduceDtype: Precision;
  /** Bytes a device may use (default: the profile's memory; less when compile derates it, see compile.ts). */
  readonly capacity?: number;
  /** Gradient bucket size (parallel.bucket_mb). */
  readonly bucketBytes: number;
  /** FSDP: units gathered ahead of the one computing (parallel.fsdp_prefetch; default 1). */
  readonly prefetch?: number;
  /** Seconds of gradient clipping's norm all-reduce in each step (cost/grad-norm.ts; 0 or absent: none). */
  readonly normSeconds?: number;
  /** FSDP's size-based auto-wrap threshold (parallel.fsdp_min_params; default 1e8). */
  readonly fsdpMinParams?: number;
}

/** Micro-batches whose activations a stage holds at its peak: GPipe all m, 1F1B and ZB-H1 p − k (Narayanan
 *  et al. 2021), interleaved Megatron-LM's warm-up depth counted in chunks of 1/v of a stage. */
export function inFlight(c: Candidate, pipeRank: number): number {
  const { stages: p, microBatches: m, virtualStages: v } = c;
  switch (c.schedule) {
    case "gpipe":
      return m;
    case "1f1b":
    case "zero_bubble":
      return Math.min(p - pipeRank, m);
    case "interleaved":
      return Math.min(m * v, (v - 1) * p + 2 * (p - pipeRank) - 1) / v;
  }
}

/** The link of a data-parallel group under meshRank's layout: `count` ranks from `first`, `stride` apart
 *  (the tensor-parallel degree: one group's ranks are its replicas' tensor rank 0, 1, ...). */
export function blockLink(cluster: Cluster, first: number, count: number, stride: number): Link {
  return groupLink(cluster, count === 1 ? [first] : [first, first + (count - 1) * stride]);
}

/** Per-layer seconds of one micro-batch under a candidate's shard strategy, before any recompute: compute
 *  (forward + backward) and the collectives that repeat every micro-batch on the comm stream (FSDP's gathers
 *  and reduce-scatters, ShardedDDP's gradient reduces). The same for every candidate with the same micro-batch
 *  size, data-parallel degree and sharding, so the search shares it. */
export interface LayerSeconds {
  readonly forward: Float64Array;
  readonly backward: Float64Array;
  readonly comm: Float64Array;
  /** FSDP with resharding: the all-gather of each layer's unit, which a recompute must repeat. */
  readonly gather: Float64Array;
  /** FSDP: the part of `comm` that runs during the layer's backward (its gather again under resharding, its
   *  reduce-scatter without no_sync): comm-stream time the step's own collectives cannot use. */
  readonly backwardComm: Float64Array;
  /** FSDP: the layer's once-per-step collectives, issued as its last backward completes its gradient: the
   *  reduce-scatter under no_sync, the all-reduce of its gradient shard over the replicas under hybrid
   *  sharding. */
  readonly step: Float64Array;
  readonly computeSum: number;
  readonly commSum: number;
  /** Σ over layers of the comm time a layer's backward leaves free, max(0, backward − backwardComm): no
   *  stage's last backward leaves more for the once-per-step collectives. */
  readonly slackSum: number;
  readonly stepSum: number;
  /** The largest layer's compute and comm. */
  readonly computeMax: number;
  readonly commMax: number;
  /** FSDP: what the first layer's unit adds to a step with nothing to hide it: its all-gather before the
   *  first forward, and (reducing every micro-batch) its reduce-scatter after the last backward, which
   *  completes its gradient last. */
  readonly edge: number;
}

/** A collective over `bytes` issued as buckets of at most `bucketBytes` (DDP/ShardedDDP gradient buckets):
 *  every bucket pays the ring's latency. */
export function bucketedTime(kind: CollectiveKind, bytes: number, ranks: number, link: Link, bucketBytes: number): number {
  const buckets = Math.max(1, Math.ceil(bytes / bucketBytes));
  return buckets * collectiveTime(kind, bytes / buckets, ranks, link);
}

/** FSDP's two groups under meshRank's layout: a shard group is s consecutive data-parallel ranks (s·t global
 *  ranks, t apart), its replica group the ranks at the same place in each of the d/s shard groups (s·t apart). */
function shardGroupLinks(cluster: Cluster, c: Candidate): { readonly shard: Link; readonly replica: Link } {
  return {
    shard: blockLink(cluster, 0, c.shardGroup, c.tensorParallel),
    replica: blockLink(cluster, 0, c.dataParallel / c.shardGroup, c.shardGroup * c.tensorParallel),
  };
}

export function layerSeconds(
  table: LayerTable,
  pr: MicroBatchTimes,
  cluster: Cluster,
  c: Candidate,
  perParam: StateBytesPerParam,
  bucketBytes: number,
  fsdpMinParams?: number,
): LayerSeconds {
  const L = table.count;
  // FSDP gathers and reduces units, not layers: each unit's collectives are priced at its lowest layer (where
  // its gradient completes), once, at the unit's size (a model of small layers is a few units: gpt2-124m's
  // 16 layers are two under the default 1e8, its embeddings and first 9 blocks, and the rest as the root, and
  // pricing each layer's collectives apart paid 16 rings' latency for 2).
  const units = c.shard === "fsdp" ? table.fsdpUnits(fsdpMinParams) : undefined;
  // Every stage's data-parallel group spans as many nodes as stage 0's under meshRank's layout.
  const link = blockLink(cluster, 0, c.dataParallel, c.tensorParallel);
  const groups = shardGroupLinks(cluster, c);
  const replicas = c.dataParallel / c.shardGroup;
  const forward = new Float64Array(L);
  const backward = new Float64Array(L);
  const comm = new Float64Array(L);
  const gathers = new Float64Array(L);
  const backwardComm = new Float64Array(L);
  const step = new Float64Array(L);
  let computeSum = 0;
  let commSum = 0;
  let slackSum = 0;
  let stepSum = 0;
  let computeMax = 0;
  let commMax = 0;
  const fsdpTimes = new Map<number, { gather: number; scatter: number; replicas: number }>();
  const sddpTimes = new Map<number, number>();
  for (let l = 0; l < L; l++) {
    const f = pr.forward[l]!;
    const b = pr.backwardInput[l]! + pr.backwardWeight[l]!;
    // Weights travel in their storage type, gradients in the reduction's (train.reduce_dtype: fp32 by
    // default), as the shard plans move them.
    // A unit's collectives at its lead layer (its first); its other layers' are in them.
    const u = units ? units.unitOf[l]! : -1;
    const held = units ? (u >= 0 && units.lead[u] === l ? units.params[u]! : 0) : table.params[l]!;
    const weights = held * perParam.param;
    const grads = held * perParam.grad;
    let m = 0;
    if (c.shard === "fsdp" && held > 0) {
      // Units of one size (a model's identical blocks) are priced once.
      let priced = fsdpTimes.get(held);
      if (!priced) {
        priced = {
          gather: collectiveTime("all_gather", weights, c.shardGroup, groups.shard),
          scatter: collectiveTime("reduce_scatter", grads, c.shardGroup, groups.shard),
          replicas: collectiveTime("all_reduce", grads / c.shardGroup, replicas, groups.replica),
        };
        fsdpTimes.set(held, priced);
      }
      const { gather, scatter } = priced;
      const perMicroBatch = c.noSync ? 0 : scatter;
      m = (c.reshardAfterForward ? 2 : 1 / c.microBatches) * gather + perMicroBatch;
      if (c.reshardAfterForward) gathers[l] = gather;
      backwardComm[l] = (c.reshardAfterForward ? gather : 0) + perMicroBatch;
      // Hybrid: each shard group reduced the unit's gradient to shards; the groups sum their shards.
      step[l] = (c.noSync ? scatter : 0) + priced.replicas;
    } else if (c.shard === "sddp") {
      // ShardedDDP reduces each micro-batch's gradients to their owners as they are ready (src/shard/sddp.ts).
      let reduce = sddpTimes.get(table.params[l]!);
      if (reduce === undefined) {
        reduce = bucketedTime("reduce", grads, c.dataParallel, link, bucketBytes);
        sddpTimes.set(table.params[l]!, reduce);
      }
      m = reduce;
    }
    forward[l] = f;
    backward[l] = b;
    comm[l] = m;
    computeSum += f + b;
    commSum += m;
    slackSum += Math.max(0, b - backwardComm[l]!);
    stepSum += step[l]!;
    computeMax = Math.max(computeMax, f + b);
    commMax = Math.max(commMax, m);
  }
  // The first unit: the one of the lowest layer holding parameters (the root, under @fsdp_unit, when the
  // embeddings are not annotated).
  const firstLayer = table.params.findIndex((n) => n > 0);
  const first = units && firstLayer >= 0 ? fsdpTimes.get(units.params[units.unitOf[firstLayer]!]!) : undefined;
  const edge = first ? first.gather + (c.noSync ? 0 : first.scatter) : 0;
  return { forward, backward, comm, gather: gathers, backwardComm, step, computeSum, commSum, slackSum, stepSum, computeMax, commMax, edge };
}

export class StageModel {
  readonly layers: number;
  /** Virtual stages (p·v). */
  readonly stageCount: number;
  /** Per-layer seconds with nothing recomputed beyond @checkpoint, and with the recompute `checkpoint` adds. */
  private readonly computePrefix: Float64Array;
  private readonly commPrefix: Float64Array;
  private readonly gatherPrefix: Float64Array;
  private readonly backwardCommPrefix: Float64Array;
  private readonly stepPrefix: Float64Array;
  private readonly tied: readonly { readonly layers: readonly number[]; readonly seconds: number }[];
  private readonly tiedPerStep: readonly { readonly layers: readonly number[]; readonly seconds: number }[];
  /** FSDP: per tied weight, what a stage holding a reader but not its owner layer adds to its unit's
   *  collectives every micro-batch. */
  private readonly tiedReplicas: readonly { readonly layers: readonly number[]; readonly owner: number; readonly seconds: number }[];
  private readonly forwardPrefix: Float64Array;
  private readonly backwardPrefix: Float64Array;
  private readonly weightPrefix: Float64Array;
  private readonly paramPrefix: Float64Array;
  private readonly weightGradPrefix: Float64Array;
  private readonly capacity: number;
  private readonly word: number;
  private readonly perParam: StateBytesPerParam;
  private readonly edgeSeconds: number;
  /** FSDP: the most parameters one inner unit gathers, and the root unit's parameters by layer. */
  private readonly maxUnitParams: number;
  private readonly rootPrefix: Float64Array | undefined;
  /** FSDP with resharding: per layer, the all-gather of its inner unit (0 in the root, which stays gathered). */
  private readonly unitGather: Float64Array | undefined;
  /** Per layer l: the first layer at or after l holding parameters (L when none), and per end j the last
   *  before j (-1 when none): the partitioner asks a stage's exposed gathers for every interval. */
  private readonly nextHolding: Int32Array;
  private readonly lastHolding: Int32Array;
  private readonly dpLinks: readonly Link[];
  private readonly p2pLinks: readonly Link[];
  /** Selective checkpointing: kinds of layer that free bytes when recomputed, best bytes per second first. */
  private readonly selective: readonly { cls: number; freed: number; seconds: number; workspace: number; count: Int32Array }[];

  constructor(
    private readonly x: StageModelInput,
    seconds: LayerSeconds = layerSeconds(x.table, x.profile, x.cluster, x.candidate, stateBytesPerParam(x.precision, x.optimizer, x.reduceDtype), x.bucketBytes, x.fsdpMinParams),
  ) {
    const { table, profile: pr, cluster, candidate: c } = x;
    const L = table.count;
    this.layers = L;
    const staged = c.shard === "none" || c.shard === "oss";
    this.working =
      c.shard === "fsdp" && !c.noSync
        ? table.fsdpWorkingIn(pr.b, x.fsdpMinParams ?? DEFAULT_FSDP_MIN_PARAMS, stateBytesPerParam(x.precision, x.optimizer, x.reduceDtype).grad)
        : (i, j) => pr.workingIn(i, j, staged);
    this.recomputeKnown = new Int32Array(L + 1);
    this.recomputeByStart = new Float64Array(L + 1);
    this.stageCount = c.stages * c.virtualStages;
    this.capacity = x.capacity ?? cluster.profile.memory.capacity;
    this.perParam = stateBytesPerParam(x.precision, x.optimizer, x.reduceDtype);
    this.word = this.perParam.param;
    const units = c.shard === "fsdp" ? table.fsdpUnits(x.fsdpMinParams) : undefined;
    this.maxUnitParams = units?.maxParams ?? 0;
    this.rootPrefix = units?.rootPrefix;
    this.unitGather = units && Float64Array.from(units.unitOf, (u) => (u >= 0 && u < units.inner ? seconds.gather[units.lead[u]!]! : 0));
    this.nextHolding = new Int32Array(L + 1).fill(L);
    for (let l = L - 1; l >= 0; l--) this.nextHolding[l] = table.params[l]! > 0 ? l : this.nextHolding[l + 1]!;
    this.lastHolding = new Int32Array(L + 1).fill(-1);
    for (let j = 1; j <= L; j++) this.lastHolding[j] = table.params[j - 1]! > 0 ? j - 1 : this.lastHolding[j - 1]!;
    this.dpLinks = Array.from({ length: c.stages }, (_, k) => blockLink(cluster, meshRank(c, k, 0), c.dataParallel, c.tensorParallel));
    this.p2pLinks = Array.from({ length: c.stages }, (_, k) => groupLink(cluster, [meshRank(c, k, 0), meshRank(c, (k + 1) % c.stages, 0)]));
    const recomputeShare = c.checkpoint === "always" ? 1 : c.checkpoint === "except_last" ? (c.microBatches - 1) / c.microBatches : 0;
    const compute = new Float64Array(L);
    for (let l = 0; l < L; l++) compute[l] = seconds.forward[l]! + seconds.backward[l]! + recomputeShare * pr.forward[l]!;
    this.computePrefix = prefix(compute);
    // A recompute re-runs the forward, so under FSDP with resharding it gathers the units again.
    this.commPrefix = prefix(seconds.comm.map((m, l) => m + recomputeShare * seconds.gather[l]!));
    this.gatherPrefix = prefix(seconds.gather);
    this.backwardCommPrefix = prefix(seconds.backwardComm);
    this.stepPrefix = prefix(seconds.step);
    this.edgeSeconds = seconds.edge;
    this.forwardPrefix = prefix(seconds.forward);
    this.backwardPrefix = prefix(seconds.backward);
    this.weightPrefix = prefix(pr.backwardWeight);
    this.paramPrefix = prefix(table.params);
    this.weightGradPrefix = prefix(pr.weightGrad);
    // A tied weight's gradient is all-reduced between its holders' stages every micro-batch under FSDP and
    // ShardedDDP (once per step otherwise, FSDP's no_sync included, whose partial is summed over the step
    // first: step-model.ts), over the link that spans the pipeline.
    const perMicroBatch = (c.shard === "fsdp" && !c.noSync) || c.shard === "sddp";
    const pipeLink = groupLink(cluster, [0, cluster.devices - 1]);
    const tied = table.shared.map((t) => ({ layers: t.layers, seconds: collectiveTime("all_reduce", t.params * this.perParam.grad, 2, pipeLink) }));
    this.tied = perMicroBatch ? tied : [];
    this.tiedPerStep = perMicroBatch ? [] : tied;
    // FSDP's units count a tied weight once, in the unit of the layer it is filed under (LayerTable.fsdpUnits);
    // a stage that reads it without holding that layer keeps a replica in one of its own units, which then
    // gathers and reduce-scatters it too: the bytes' share of those collectives (their latency is the unit's).
    const shardLink = shardGroupLinks(cluster, c).shard;
    const extra = (kind: CollectiveKind, bytes: number) => collectiveTime(kind, bytes, c.shardGroup, shardLink) - collectiveTime(kind, 0, c.shardGroup, shardLink);
    this.tiedReplicas =
      c.shard !== "fsdp"
        ? []
        : table.shared.map((t) => ({
            layers: t.layers,
            owner: t.owner,
            seconds: (c.reshardAfterForward ? 2 : 1 / c.microBatches) * extra("all_gather", t.params * this.word) + (c.noSync ? 0 : extra("reduce_scatter", t.params * this.perParam.grad)),
          }));
    this.selective = c.checkpoint !== "selective" ? [] : selectiveKinds(table, pr);
  }

  private get c(): Candidate {
    return this.x.candidate;
  }

  pipeRank(stage: number): number {
    return stage % this.c.stages;
  }

  /** Compute seconds of layers [i, j) per micro-batch, with the checkpoint mode's recompute. */
  private computeSeconds(i: number, j: number): number {
    return this.computePrefix[j]! - this.computePrefix[i]!;
  }

  /** Comm-stream seconds of stage k over [i, j) per micro-batch. A stage holding some but not all of a
   *  tied weight's layers pays its all-reduce (in practice the embedding and the head: never one stage
   *  unless there is one stage, so the time still never decreases as a stage grows), and under FSDP, when it
   *  does not hold the layer the weight is filed under, its replica's share of its unit's collectives. */
  private commSeconds(k: number, i: number, j: number): number {
    let t = this.commPrefix[j]! - this.commPrefix[i]! + this.transferSeconds(k, j);
    for (const tie of this.tied) {
      let inside = 0;
      for (const l of tie.layers) if (l >= i && l < j) inside++;
      if (inside > 0 && inside < tie.layers.length) t += tie.seconds;
    }
    for (const tie of this.tiedReplicas) {
      if (tie.owner >= i && tie.owner < j) continue;
      for (const l of tie.layers) {
        if (l >= i && l < j) {
          t += tie.seconds;
          break;
        }
      }
    }
    return t;
  }

  /** commSeconds without the stage's pipeline transfers: the collectives alone (the pipeline simulator runs
   *  the transfers on their own). */
  collectiveSeconds(k: number, i: number, j: number): number {
    return this.commSeconds(k, i, j) - this.transferSeconds(k, j);
  }

  /** The pipeline transfers in commSeconds: both across the stage's last cut (its activation out, the
   *  gradient back in). */
  cutTransferSeconds(k: number, j: number): number {
    return this.transferSeconds(k, j);
  }

  private transferSeconds(k: number, j: number): number {
    if (j >= this.layers) return 0;
    const r = this.pipeRank(k);
    return (this.transfers[r] ??= this.transferTable(r))[j]!;
  }

  /** Both transfers across each cut from pipeline rank r. Ranks whose link is alike (in a node, across nodes)
   *  share one table: the partitioner asks for every cut of every stage. */
  private transferTable(r: number): Float64Array {
    const link = this.p2pLinks[r]!;
    const alike = this.p2pLinks.findIndex((l, q) => this.transfers[q] !== undefined && l.bandwidth === link.bandwidth && l.latency === link.latency);
    if (alike >= 0) return this.transfers[alike]!;
    return Float64Array.from(this.x.profile.cut, (bytes) => 2 * collectiveTime("send_recv", bytes, 2, link));
  }
  /** transferTable's answer by pipeline rank, filled as first asked. */
  private readonly transfers: (Float64Array | undefined)[] = [];

  /** Parameters a stage of layers [i, j) holds (tied weights once). */
  paramsIn(i: number, j: number): number {
    return this.x.table.stageParams(this.paramPrefix, i, j);
  }

  /** Model state and FSDP's gathered units and unsharded gradients on one device, for a share 1/v of the
   *  device's memory (the units in flight counted 1/v: a device's stages hold them in turn, see perDeviceBytes). */
  stateBytes(i: number, j: number): number {
    // The partitioner's innermost call: the stage's parameters looked up once for both parts.
    const params = this.paramsIn(i, j);
    return this.heldStateBytes(i, j, params) + this.unitsInFlightBytes(i, j, params) / this.c.virtualStages;
  }

  /** What the optimizer step reads and writes: the ZeRO formula's model state of the stage on one device,
   *  as compile prices it (stage-costs.ts), without what is staged or gathered for the micro-batches. */
  optimizerBytes(i: number, j: number): number {
    return this.shardedStateBytes(this.paramsIn(i, j));
  }

  /** modelStateBytes for a stage of `params` parameters. */
  private shardedStateBytes(params: number): number {
    const c = this.c;
    // modelStateBytes' formulas, with the bytes per parameter looked up once per model (this is the
    // partitioner's innermost call). FSDP shards over its shard group (ZeRO-3 over s ranks).
    const { param: pb, grad: gb, optimizer: kb } = this.perParam;
    const shard = Math.ceil(params / (c.shard === "fsdp" ? c.shardGroup : c.dataParallel));
    return c.shard === "none" ? (pb + gb + kb) * params : c.shard === "oss" ? (pb + gb) * params + kb * shard : c.shard === "sddp" ? pb * params + (gb + kb) * shard : (pb + gb + kb) * shard;
  }

  /** The state a stage holds all step, whichever of its device's stages is running. */
  private heldStateBytes(i: number, j: number, params: number): number {
    const c = this.c;
    const gb = this.perParam.grad;
    let bytes = this.shardedStateBytes(params);
    if (c.shard === "sddp") {
      // Each micro-batch's gradients are staged unsharded until their reduce: compile's memory plan keeps the
      // stage's buckets from the start of the backward to the last REDUCE, so a whole stage's gradient is live
      // at the end of a backward (ZeRO's g·Ψ/N holds between steps, not within one).
      bytes += gb * params;
    } else if (c.shard === "fsdp") {
      // Under no_sync every unit's gradient accumulates from the first micro-batch's backward to its one
      // reduce-scatter: the stage's whole gradient, held. Without resharding every unit stays gathered, and
      // with it the root unit (FSDP never reshards the root).
      if (c.noSync) bytes += gb * params;
      bytes += (c.reshardAfterForward ? this.rootIn(i, j) : params) * this.word;
    }
    return bytes;
  }

  /** Parameters of the FSDP root unit in [i, j) (whole-model grouping: compile groups each stage apart). */
  private rootIn(i: number, j: number): number {
    return this.rootPrefix ? this.rootPrefix[j]! - this.rootPrefix[i]! : 0;
  }

  /** FSDP's units in flight while the stage runs (compile's memory plan, at layer granularity): gathered, the
   *  inner unit computing and the `prefetch` units gathered ahead of it (FSDP2's prefetch); and, without
   *  no_sync, unsharded gradients: the root's, from the backward's first write to its reduce-scatter, the
   *  inner unit being produced and the one being reduce-scattered. Each inner unit is at most the largest,
   *  and all of them at most the stage's parameters outside the root. */
  private unitsInFlightBytes(i: number, j: number, params: number): number {
    const c = this.c;
    if (c.shard !== "fsdp") return 0;
    const root = this.rootIn(i, j);
    const inner = params - root;
    const gathered = c.reshardAfterForward ? Math.min(inner, (1 + (this.x.prefetch ?? 1)) * this.maxUnitParams) * this.word : 0;
    const produced = c.noSync ? 0 : (root + Math.min(inner, 2 * this.maxUnitParams)) * this.perParam.grad;
    return gathered + produced;
  }

  /** What only the running stage holds (FSDP's units in flight, the layer's working set): the stage's
   *  memoryBytes counts 1/v of it, so that v stages alike fill a device exactly. */
  private transientBytes(i: number, j: number): number {
    return this.unitsInFlightBytes(i, j, this.paramsIn(i, j)) + this.workingBytes(i, j);
  }

  /** Each pipeline rank's bytes from its stages' shares `bytesOf(k, i, j)` (memoryBytes, bytesWithRecompute,
   *  or stateBytes + fixedActivationBytes): what only the running stage holds is counted once per device,
   *  the largest of it. */
  perDeviceBytes(bounds: readonly (readonly [number, number])[], bytesOf: (k: number, i: number, j: number) => number): number[] {
    const total = new Array<number>(this.c.stages).fill(0);
    const most = new Array<number>(this.c.stages).fill(0);
    bounds.forEach(([i, j], k) => {
      const r = this.pipeRank(k);
      const t = this.transientBytes(i, j);
      total[r]! += bytesOf(k, i, j) - t / this.c.virtualStages;
      most[r] = Math.max(most[r]!, t);
    });
    return total.map((n, r) => n + most[r]!);
  }

  /** The stage input: the cut before it and the model inputs its layers read. */
  private inputBytes(i: number, j: number): number {
    let n = this.x.profile.cut[i]!;
    for (const m of this.x.profile.inputs) if (m.hi >= i && m.lo < j) n += m.bytes;
    return n;
  }

  private keptBytes(i: number, j: number): number {
    return this.x.profile.keptIn(i, j);
  }

  /** Activation and transfer bytes of stage k with nothing extra recomputed (selective adds nothing here). */
  activationBytes(k: number, i: number, j: number): number {
    const input = this.inputBytes(i, j);
    const kept = input + this.keptBytes(i, j);
    const n = inFlight(this.c, this.pipeRank(k));
    const transfers = 2 * (j < this.layers ? this.x.profile.cut[j]! : 0) + this.x.profile.cut[i]!;
    // ZB-H1 defers W: pipeline rank r holds up to r + 1 micro-batches' weight-gradient inputs after their
    // I (the schedule simulator's peakAwaitingW).
    const deferred = this.c.schedule === "zero_bubble" ? Math.min(this.pipeRank(k) + 1, this.c.microBatches) * this.weightGradBytes(i, j) : 0;
    // The layer being run: its backward's activation gradients or its forward's working set, on top of
    // every micro-batch's stash (compile prices both layer by layer).
    const working = this.workingBytes(i, j) / this.c.virtualStages;
    switch (this.c.checkpoint) {
      case "never":
      case "selective":
        return n * kept + transfers + deferred + working;
      case "always":
        // Every micro-batch keeps its input; one at a time is rebuilt by its recompute.
        return n * input + (kept - input) + transfers + deferred + working;
      case "except_last":
        return Math.max(0, n - 1) * input + 2 * kept - input + transfers + deferred + working;
    }
  }

  /** What one micro-batch keeps on stage k (its input included), with selective recompute applied. */
  keptPerMicroBatch(k: number, i: number, j: number): number {
    const kept = this.inputBytes(i, j) + this.keptBytes(i, j);
    return kept - (this.c.checkpoint === "selective" ? this.recompute(k, i, j)?.freed ?? 0 : 0);
  }

  /** The stage input of one micro-batch (all a checkpointed micro-batch keeps until its recompute). */
  stageInputBytes(i: number, j: number): number {
    return this.inputBytes(i, j);
  }

  /** Bytes besides the micro-batches' activations: transfer buffers and the recompute workspace. */
  fixedActivationBytes(k: number, i: number, j: number): number {
    const transfers = 2 * (j < this.layers ? this.x.profile.cut[j]! : 0) + this.x.profile.cut[i]!;
    const workspace = this.c.checkpoint === "selective" ? this.recompute(k, i, j)?.workspace ?? 0 : 0;
    return transfers + workspace + this.workingBytes(i, j) / this.c.virtualStages;
  }

  /** The most a compute action holds beyond the stash while it runs one of layers [i, j): under FSDP with a
   *  reduce-scatter every backward, beyond the unit gradients too, which unitsInFlightBytes counts (a logits
   *  gradient freed before the head's unit gradient exists is not added to it: LayerTable.fsdpWorkingIn). */
  workingBytes(i: number, j: number): number {
    return this.working(i, j);
  }
  private readonly working: (i: number, j: number) => number;

  /** What the weight-gradient ops of layers [i, j) read of one micro-batch. */
  weightGradBytes(i: number, j: number): number {
    return this.weightGradPrefix[j]! - this.weightGradPrefix[i]!;
  }

  /** Device bytes a stage needs (its 1/v share for interleaved), nothing extra recomputed. */
  memoryBytes(k: number, i: number, j: number): number {
    return this.stateBytes(i, j) + this.activationBytes(k, i, j);
  }

  /** What a stage may use: a device, or its 1/v share of one under interleaving. */
  get budget(): number {
    return this.capacity / this.c.virtualStages;
  }

  get virtualStages(): number {
    return this.c.virtualStages;
  }

  /** Seconds of the forward's recompute of layers [i, j) as an R action runs it: after the units it needs
   *  are gathered again (FSDP with resharding). */
  recomputeSeconds(i: number, j: number): number {
    let n = 0;
    for (let l = i; l < j; l++) n += this.x.profile.forward[l]!;
    return n + this.gatherPrefix[j]! - this.gatherPrefix[i]!;
  }

  cutBytes(j: number): number {
    return j < this.layers ? this.x.profile.cut[j]! : 0;
  }

  p2pLink(pipeRank: number): Link {
    return this.p2pLinks[pipeRank]!;
  }

  /** Selective checkpointing: the fewest recompute seconds that bring stage k within budget, and how many
   *  layers of each kind that takes (first layers of the kind in the stage); undefined when even
   *  recomputing every layer that frees memory does not fit. Greedy by bytes freed per recompute second,
   *  which is optimal whenever one kind of layer suffices (identical transformer blocks). */
  recompute(k: number, i: number, j: number): Recompute | undefined {
    const take = new Map<number, number>();
    const seconds = this.greedyRecompute(k, i, j, take);
    if (Number.isNaN(seconds)) return undefined;
    const g = this.greedy;
    return { seconds, take: take.size > 0 ? take : NOTHING, bytes: g.bytes, freed: g.freed, workspace: g.workspace };
  }

  /** recompute's seconds alone (NaN: no recompute fits), without building its record: the partitioner asks
   *  this millions of times per search, for the stage time and the fit of each interval, so the answers for
   *  the current (stage, end) are kept by start (a record per call was most of the search's garbage, and the
   *  partitioner asks a start's time and its fit apart, with other starts' between: keeping only the last
   *  answer priced 6–9% of the intervals again, on gpt3-175b × 1024 and llama-70b × 512). */
  private recomputeSecondsOf(k: number, i: number, j: number): number {
    const kj = k * (this.layers + 1) + j;
    if (kj !== this.recomputeEnd) {
      this.recomputeEnd = kj;
      this.recomputeRound++;
    }
    if (this.recomputeKnown[i] === this.recomputeRound) return this.recomputeByStart[i]!;
    const seconds = this.greedyRecompute(k, i, j, undefined);
    this.recomputeKnown[i] = this.recomputeRound;
    this.recomputeByStart[i] = seconds;
    return seconds;
  }
  private recomputeEnd = -1;
  private recomputeRound = 0;
  private readonly recomputeKnown: Int32Array;
  private readonly recomputeByStart: Float64Array;
  /** The bytes of greedyRecompute's last answer. */
  private readonly greedy = { bytes: 0, freed: 0, workspace: 0 };

  /** recompute()'s greedy: its seconds (NaN when nothing fits), the layers taken by kind into `take` when
   *  given, the bytes into this.greedy. */
  private greedyRecompute(k: number, i: number, j: number, take: Map<number, number> | undefined): number {
    const g = this.greedy;
    const bytes = this.memoryBytes(k, i, j);
    let deficit = bytes - this.budget;
    g.bytes = bytes;
    g.freed = 0;
    g.workspace = 0;
    if (deficit <= 0 || this.c.checkpoint !== "selective") return 0;
    const n = inFlight(this.c, this.pipeRank(k));
    let seconds = 0;
    for (const s of this.selective) {
      const count = s.count[j]! - s.count[i]!;
      if (count === 0) continue;
      // The recompute rebuilds one layer's saved tensors at a time: the largest such workspace is held once.
      const extra = Math.max(0, s.workspace - g.workspace);
      const need = Math.ceil((deficit + extra) / (n * s.freed));
      const used = Math.min(count, need);
      if (used === 0) continue;
      deficit += extra - used * n * s.freed;
      g.workspace = Math.max(g.workspace, s.workspace);
      seconds += used * s.seconds;
      g.freed += used * s.freed;
      take?.set(s.cls, used);
      if (deficit <= 0) {
        g.bytes = this.budget + deficit;
        return seconds;
      }
    }
    return NaN;
  }

  /** Bytes of stage k once selective checkpointing has recomputed what it must (memoryBytes otherwise). */
  bytesWithRecompute(k: number, i: number, j: number): number {
    return this.recompute(k, i, j)?.bytes ?? this.memoryBytes(k, i, j);
  }

  /** Seconds of stage k over [i, j) per micro-batch, with the selective recompute memory requires. */
  stageTime(k: number, i: number, j: number): number {
    return Math.max(this.computeTime(k, i, j), this.commSeconds(k, i, j));
  }

  /** Compute-stream seconds of stage k per micro-batch (selective recompute included, and the FSDP gathers
   *  that wait behind its pipeline receives). */
  computeTime(k: number, i: number, j: number): number {
    const exposed = this.exposedForwardGather(k, i, j) + this.exposedBackwardGather(k, i, j);
    if (this.c.checkpoint !== "selective") return this.computeSeconds(i, j) + exposed;
    const r = this.recomputeSecondsOf(k, i, j);
    return this.computeSeconds(i, j) + exposed + (Number.isNaN(r) ? 0 : r);
  }

  /** FSDP with resharding: a forward that waits for its input from the previous stage gathers its first unit
   *  only once it can begin (compile's placer prefetches no gather across a pipeline wait, as FSDP gathers a
   *  unit when the forward reaches it rather than holding it through the wait), so that gather is compute's
   *  wait every micro-batch. Stage 0's forwards have no such wait: theirs are prefetched. */
  exposedForwardGather(k: number, i: number, j: number): number {
    if (!this.unitGather || k === 0) return 0;
    const l = this.nextHolding[i]!;
    return l < j ? this.unitGather[l]! : 0;
  }

  /** The same for a backward that waits for its output gradient from the next stage: the unit of its last
   *  layer holding parameters, the first the backward meets. The last stage's backwards follow its forwards. */
  exposedBackwardGather(k: number, i: number, j: number): number {
    if (!this.unitGather || k === this.stageCount - 1) return 0;
    const l = this.lastHolding[j]!;
    return l >= i ? this.unitGather[l]! : 0;
  }

  fits(k: number, i: number, j: number): boolean {
    if (!this.x.table.pinsAllow(k, i, j)) return false;
    if (this.c.checkpoint === "selective") return !Number.isNaN(this.recomputeSecondsOf(k, i, j));
    return this.memoryBytes(k, i, j) <= this.budget;
  }

  forwardSeconds(i: number, j: number): number {
    return this.forwardPrefix[j]! - this.forwardPrefix[i]!;
  }
  backwardSeconds(i: number, j: number): number {
    return this.backwardPrefix[j]! - this.backwardPrefix[i]!;
  }
  weightSeconds(i: number, j: number): number {
    return this.weightPrefix[j]! - this.weightPrefix[i]!;
  }
  transfer(k: number, j: number): number {
    return this.transferSeconds(k, j) / 2;
  }
  dpLink(pipeRank: number): Link {
    return this.dpLinks[pipeRank]!;
  }
  get weightBytes(): number {
    return this.word;
  }
  /** Bytes per gradient element as the data-parallel reductions move it (train.reduce_dtype). */
  get gradBytes(): number {
    return this.perParam.grad;
  }
  /** Seconds of pipeline rank r's once-per-step FSDP collectives (no_sync's reduce-scatters, hybrid
   *  sharding's replica all-reduces) left after its last backward. Each layer's run on the comm stream once
   *  its gradient is complete, in the time the backward's own collectives leave; the first layer of the
   *  rank's first stage completes last (its backward ends the rank's step), so its own always show.
   *  Interleaved, a rank's chunks finish their last backwards one after another: after chunk c's, the
   *  cooldown still runs min(m, p) backwards of each lower chunk (Megatron-LM's order, as compile lowers
   *  it), whose comm time the collectives of chunk c and those queued behind it may use. Summing every
   *  chunk's collectives against one backward each charged llama-70b's hybrid plan on h200 × 1024 0.9 s
   *  of step tail, where compile's plan leaves rank 0's last chunk 0.06 s exposed. */
  exposedStepSeconds(r: number, bounds: readonly (readonly [number, number])[]): number {
    // The rank's chunks, highest first: the order their last backwards end in.
    const chunks: { step: number; free: number }[] = [];
    let last = 0;
    bounds.forEach(([i, j], k) => {
      if (this.pipeRank(k) !== r) return;
      const free = Math.max(0, this.backwardPrefix[j]! - this.backwardPrefix[i]! - (this.backwardCommPrefix[j]! - this.backwardCommPrefix[i]!));
      chunks.unshift({ step: this.stepPrefix[j]! - this.stepPrefix[i]!, free });
      if (k === r) last = this.stepPrefix[i + 1]! - this.stepPrefix[i]!;
    });
    const cooldown = Math.min(this.c.microBatches, this.c.stages);
    // Free comm time from chunk c's last backward to the rank's end: its own last backward's and the
    // cooldown's of every lower chunk. The queue, first in first out, ends max over c of (its start, -free
    // time before the end, + everything queued from c on).
    let total = 0;
    let exposed = -Infinity;
    chunks.forEach(({ step }, q) => {
      if (step === 0) return;
      let window = chunks[q]!.free;
      for (let lower = q + 1; lower < chunks.length; lower++) window += cooldown * chunks[lower]!.free;
      let queued = 0;
      for (let later = q; later < chunks.length; later++) queued += chunks[later]!.step;
      exposed = Math.max(exposed, queued - window);
      total += step;
    });
    return total === 0 ? 0 : Math.max(last, exposed);
  }

  /** Seconds of the once-per-step all-reduces of tied weights whose holders include pipeline rank r and
   *  another rank (DDP, OSS and FSDP's no_sync). */
  tiedStepSeconds(r: number, bounds: readonly (readonly [number, number])[]): number {
    let t = 0;
    for (const tie of this.tiedPerStep) {
      const ranks = new Set<number>();
      bounds.forEach(([i, j], k) => {
        if (tie.layers.some((l) => l >= i && l < j)) ranks.add(this.pipeRank(k));
      });
      if (ranks.size > 1 && ranks.has(r)) t += tie.seconds;
    }
    return t;
  }

  get bucketBytes(): number {
    return this.x.bucketBytes;
  }

  /** Gradient clipping's norm all-reduce, once per step before the optimizer steps. */
  get normSeconds(): number {
    return this.x.normSeconds ?? 0;
  }

  /** FSDP's first unit's collectives that nothing hides (LayerSeconds.edge). */
  get fsdpEdgeSeconds(): number {
    return this.edgeSeconds;
  }
}

function selectiveKinds(table: LayerTable, pr: MicroBatchProfile): StageModel["selective"] {
  const byClass = new Map<number, { freed: number; seconds: number; workspace: number }>();
  table.classOf.forEach((cls, l) => {
    if (!byClass.has(cls) && !table.annotated[l]) byClass.set(cls, { freed: pr.reducible[l]!, seconds: pr.forward[l]!, workspace: pr.saved[l]! });
  });
  const out = [...byClass.entries()]
    .filter(([, v]) => v.freed > 0)
    .map(([cls, v]) => {
      const count = new Int32Array(table.count + 1);
      for (let l = 0; l < table.count; l++) count[l + 1] = count[l]! + (table.classOf[l] === cls && !table.annotated[l] ? 1 : 0);
      return { cls, ...v, count };
    });
  // Most bytes per recompute second first; ties by kind for determinism.
  out.sort((a, b) => b.freed / Math.max(b.seconds, 1e-30) - a.freed / Math.max(a.seconds, 1e-30) || a.cls - b.cls);
  return out;
}
