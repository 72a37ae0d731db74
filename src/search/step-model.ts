// Closed-form step time of a candidate with a given stage split, and a lower bound that needs no split: the
// search ranks by the first and prunes with the second, so the bound must never exceed the estimate.
//
// Pipeline part, t_k the per-micro-batch time of stage k (device k for interleaved, its v chunks together):
//   GPipe, 1F1B      (m − 1)·max t + Σ t            (exact for equal stages: (m + p − 1)·t)
//   ZB-H1            1F1B − (p − 1)·2·w̄             (deferred W fills the bubble: Qi et al. 2024, §3)
//   interleaved      m·max t + (Σ t − max t)/v       (exact for equal stages: (m + (p − 1)/v)·t)
// every one clamped below by m·max t (the busiest device must run all its micro-batches). Then the
// step's tail: the gradient synchronisation the last backward does not hide (DDP's and OSS's all-reduce
// buckets on the slowest rank; FSDP's no_sync reduce-scatters and hybrid all-reduces on every rank, added
// up, and its first unit's gather and reduce-scatter, which nothing hides), the optimizer step, and
// OSS/ShardedDDP's parameter broadcast after it; with gradient clipping across devices, its norm
// all-reduce before the optimizer step.
import type { Optimizer, Precision } from "../check/settings-types.js";
import { stageBounds } from "./partition.js";
import { collectiveTime, type Link } from "../cost/collectives.js";
import { modelStateBytes } from "../cost/memory.js";
import type { Candidate } from "./candidate.js";
import type { LayerSeconds, StageModel } from "./stage-model.js";

export interface StepEstimate {
  readonly seconds: number;
  readonly pipeline: number;
  readonly sync: number;
  readonly optimizer: number;
  readonly stageTimes: readonly number[];
}

/** The optimizer step reads and writes the device's model state once: memory-bound (stage-costs.ts). */
function optimizerSeconds(stateBytes: number, bandwidth: number): number {
  return (2 * stateBytes) / bandwidth;
}

/** The estimate for layers split as `sizes` over the p·v (virtual) stages. */
export function estimateStep(c: Candidate, model: StageModel, sizes: readonly number[], memoryBandwidth: number): StepEstimate {
  const p = c.stages;
  const m = c.microBatches;
  const bounds = stageBounds(sizes);
  const device = new Array<number>(p).fill(0);
  const weight = new Array<number>(p).fill(0);
  const stateOf = new Array<number>(p).fill(0);
  bounds.forEach(([i, j], k) => {
    const r = k % p;
    device[r]! += model.stageTime(k, i, j);
    weight[r]! += model.weightSeconds(i, j);
    stateOf[r]! += model.optimizerBytes(i, j);
  });
  const tMax = Math.max(...device);
  const tSum = device.reduce((a, b) => a + b, 0);
  let pipeline: number;
  switch (c.schedule) {
    case "gpipe":
    case "1f1b":
      pipeline = (m - 1) * tMax + tSum;
      break;
    case "zero_bubble": {
      // ZB-H1's bubble is (p − 1)(F + I − W) where 1F1B's is (p − 1)(F + I + W).
      const wMean = weight.reduce((a, b) => a + b, 0) / p;
      pipeline = (m - 1) * tMax + tSum - (p - 1) * 2 * wMean;
      break;
    }
    case "interleaved":
      pipeline = m * tMax + (tSum - tMax) / c.virtualStages;
      break;
  }
  pipeline = Math.max(pipeline, m * tMax);
  let sync = c.shard === "fsdp" ? fsdpTail(c, model, bounds) + model.fsdpEdgeSeconds : 0;
  let optimizer = 0;
  for (let r = 0; r < p; r++) {
    optimizer = Math.max(optimizer, optimizerSeconds(stateOf[r]!, memoryBandwidth));
    if (c.shard !== "fsdp") sync = Math.max(sync, tailSync(c, model, r, bounds));
  }
  // Clipping's norm all-reduce waits for every rank's gradients, and every optimizer step for it.
  sync += model.normSeconds;
  return { seconds: pipeline + sync + optimizer, pipeline, sync, optimizer, stageTimes: device };
}

/**
 * FSDP's step tail. Its per-micro-batch collectives are in the stage times; its once-per-step ones (no_sync's
 * reduce-scatters, hybrid sharding's all-reduces) overlap each rank's last backward as its units' gradients
 * complete (stage-model.ts exposedStepSeconds), but on the comm stream ahead of that backward's transfer to
 * the previous rank (compile's placer moves only collectives that no per-micro-batch one follows behind
 * transfers: DDP's and OSS's all-reduces, not these), so what each rank leaves exposed delays every rank
 * before it: the exposures add up along the pipeline. no_sync sums a tied weight's gradient over the step
 * before its one all-reduce.
 */
function fsdpTail(c: Candidate, model: StageModel, bounds: readonly [number, number][]): number {
  let exposed = 0;
  let tied = 0;
  for (let r = 0; r < c.stages; r++) {
    exposed += model.exposedStepSeconds(r, bounds);
    if (c.noSync) tied = Math.max(tied, model.tiedStepSeconds(r, bounds));
  }
  return exposed + tied;
}

/** The step's tail on pipeline rank r (DDP, OSS, ShardedDDP): gradient synchronisation not hidden behind its
 *  last backward, tied weights' all-reduce, the owners' parameter broadcast. */
function tailSync(c: Candidate, model: StageModel, r: number, bounds: readonly [number, number][]): number {
  // A tied weight split across pipeline ranks: DDP and OSS all-reduce its gradient between them once per
  // step (ShardedDDP every micro-batch, inside the stage times).
  const tied = c.shard === "sddp" ? 0 : model.tiedStepSeconds(r, bounds);
  if (c.dataParallel === 1) return tied;
  let params = 0;
  bounds.forEach(([i, j], k) => {
    if (k % c.stages === r) params += model.paramsIn(i, j);
  });
  const link = model.dpLink(r);
  // DDP and OSS all-reduce the gradients once (in the reduction's type), overlapping the last backward;
  // ShardedDDP reduced them per micro-batch already.
  const exposed = c.shard === "sddp" ? 0 : exposedAllReduce(c, model, r, bounds);
  const broadcast = c.shard === "none" ? 0 : ownerBroadcastSeconds(params * model.weightBytes, c.dataParallel, link, model.bucketBytes);
  return exposed + broadcast + tied;
}

/**
 * OSS's and ShardedDDP's broadcast of the updated parameters after the optimizer step, as compile plans it
 * (src/shard/owners.ts): each of the d owners broadcasts its share (an even 1/d of `bytes` here) in buckets
 * of at most `bucketBytes`, one collective after another on the comm stream. Every broadcast pays the ring's
 * latency: d of them at least, not the one all-gather of the whole a shared buffer would be (gpt-tiny on 4 CPU
 * devices: four broadcasts of 0.18 ms each, 0.71 ms, where one all-gather was priced at 0.23 ms).
 */
export function ownerBroadcastSeconds(bytes: number, owners: number, link: Link, bucketBytes: number): number {
  if (owners <= 1 || bytes <= 0) return 0;
  const share = bytes / owners;
  const buckets = Math.max(1, Math.ceil(share / bucketBytes));
  return owners * buckets * collectiveTime("broadcast", share / buckets, owners, link);
}

/**
 * What DDP's and OSS's gradient all-reduce leaves exposed after pipeline rank r's last backward, as compile
 * plans it (src/shard/ddp.ts): gradients fill size-capped buckets in the order they become ready (the rank's
 * layers from its last down; a tied weight's gradient is complete at its lowest layer), and a bucket is
 * all-reduced once its last layer's backward is done and the bucket before it has been (one collective at a
 * time on the comm stream). A model under one bucket hides nothing: its one all-reduce starts as the backward
 * ends (gpt-tiny, tp 2 × dp 2 on CPU: the search said 386 µs a step where the compiled plan says 646 µs when
 * every bucket was taken to overlap the whole backward). Buckets close between layers here, between
 * parameters in compile.
 */
function exposedAllReduce(c: Candidate, model: StageModel, r: number, bounds: readonly [number, number][]): number {
  const link = model.dpLink(r);
  let elapsed = 0;
  let commFree = 0;
  let fill = 0;
  const flush = (): void => {
    if (fill === 0) return;
    commFree = Math.max(commFree, elapsed) + collectiveTime("all_reduce", fill, c.dataParallel, link);
    fill = 0;
  };
  for (let k = bounds.length - 1; k >= 0; k--) {
    if (k % c.stages !== r) continue;
    const [i, j] = bounds[k]!;
    // Prefix differences: a parameter tied between layers of the stage counts at the lowest of them.
    let upper = model.paramsIn(i, j);
    for (let l = j - 1; l >= i; l--) {
      const lower = model.paramsIn(i, l);
      const bytes = (upper - lower) * model.gradBytes;
      upper = lower;
      // Layer l does not fit the open bucket: that bucket is complete with the layer above, ready now.
      if (fill > 0 && fill + bytes > model.bucketBytes) flush();
      elapsed += model.backwardSeconds(l, l + 1);
      fill += bytes;
    }
  }
  flush();
  return Math.max(0, commFree - elapsed);
}

/**
 * A lower bound on estimateStep over every split. With T = max(Σ / p, the largest layer's compute or comm)
 * (the busiest device runs at least its share of either stream, and the largest layer) and Σ t ≥ Σ, each
 * closed form above is increasing in max t and in Σ t, so putting T and Σ floors in gives a bound; the
 * optimizer step and the parameter broadcast each take at least a device's share of the model state (both
 * grow with the bytes), and clipping's norm all-reduce and FSDP's first unit's exposed collectives are the
 * same in every split. FSDP's once-per-step collectives: rank 0's stage starts at layer 0, whose own show
 * after the step's last backward, and the ranks' exposures add up to at least what the layers' backwards
 * together leave no comm time for.
 */
export interface BoundInput {
  readonly seconds: LayerSeconds;
  /** Σ recompute seconds the checkpoint mode adds over all layers (schedule-level checkpointing). */
  readonly recomputeSeconds: number;
  /** Σ weight-gradient seconds over all layers (what ZB-H1 may defer). */
  readonly weightSeconds: number;
  /** The data-parallel group's link. */
  readonly dpLink: Link;
  /** Bytes per weight on the device. */
  readonly word: number;
  readonly totalParams: number;
  readonly memoryBandwidth: number;
  readonly precision: Precision;
  readonly optimizer: Optimizer;
  readonly reduceDtype: Precision;
  /** Gradient buckets' size cap (OSS's and ShardedDDP's broadcasts go in buckets of it). */
  readonly bucketBytes: number;
  /** Gradient clipping's norm all-reduce (0 without one): the same in every split. */
  readonly normSeconds: number;
}

export function lowerBound(c: Candidate, x: BoundInput): number {
  // A stage's time is the larger of its compute and comm streams: Σ over stages ≥ either stream's total.
  const sum = Math.max(x.seconds.computeSum + x.recomputeSeconds, x.seconds.commSum);
  const p = c.stages;
  const m = c.microBatches;
  const T = Math.max(sum / p, x.seconds.computeMax, x.seconds.commMax);
  let pipeline: number;
  switch (c.schedule) {
    case "gpipe":
    case "1f1b":
      pipeline = (m - 1) * T + sum;
      break;
    case "zero_bubble":
      pipeline = (m - 1) * T + sum - (p - 1) * 2 * (x.weightSeconds / p);
      break;
    case "interleaved":
      pipeline = (m - 1 / c.virtualStages) * T + sum / c.virtualStages;
      break;
  }
  pipeline = Math.max(pipeline, m * T);
  const share = Math.floor(x.totalParams / p);
  const state = modelStateBytes(share, c.shardGroup, c.shard, x.precision, x.optimizer, x.reduceDtype);
  const broadcast = c.shard === "oss" || c.shard === "sddp" ? ownerBroadcastSeconds(share * x.word, c.dataParallel, x.dpLink, x.bucketBytes) : 0;
  const stepSync = x.seconds.stepSum > 0 ? Math.max(x.seconds.step[0]!, x.seconds.stepSum - x.seconds.slackSum) : 0;
  return pipeline + optimizerSeconds(state, x.memoryBandwidth) + broadcast + stepSync + x.seconds.edge + x.normSeconds;
}
