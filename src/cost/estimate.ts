// The cost and memory estimate of a checked model for one training step on a cluster: FLOPs and one-device
// time per layer, activation memory per micro-batch, and model-state memory per device under each sharding
// strategy. What `fsm cost` prints and the planner's starting point.
import type { CheckedModel } from "../check/check.js";
import { SHARD_STRATEGIES, type ShardStrategy } from "../check/settings-types.js";
import type { DimBindings } from "../graph/op-cost.js";
import { buildTrainingGraph } from "../passes/autodiff.js";
import { activationMemory } from "./activations.js";
import type { Cluster } from "./cluster.js";
import { costGraph } from "./graph-cost.js";
import { modelStateBytes, stateBytesPerParam, totalBytesPerParam, type StateBytesPerParam } from "./memory.js";

/** A model the estimate cannot cover (no train section): reported like a diagnostic, exit 1. */
export class EstimateError extends Error {}

export interface LayerEstimate {
  readonly index: number;
  readonly name: string;
  readonly parameters: number;
  /** FLOPs of the whole global batch. */
  readonly forwardFlops: number;
  readonly backwardFlops: { readonly input: number; readonly weight: number };
  /** Saved for backward, one micro-batch, no checkpointing. */
  readonly activationBytes: number;
  /** The layer's inputs only: what it keeps per micro-batch when checkpointed. */
  readonly checkpointedActivationBytes: number;
  /** Forward + backward of the global batch on one device. */
  readonly seconds: number;
}

export interface ModelEstimate {
  readonly model: string;
  readonly cluster: { readonly name: string; readonly description: string; readonly devices: number; readonly nodes: number; readonly devicesPerNode: number };
  readonly batch: number;
  /** null for models without a sequence dimension. */
  readonly seq: number | null;
  /** The micro-batch the activation columns assume. */
  readonly microBatch: number;
  readonly precision: string;
  readonly optimizer: string;
  readonly parameters: number;
  /** Forward + backward FLOPs of the global batch. */
  readonly flopsPerStep: number;
  readonly forwardFlopsPerStep: number;
  readonly backwardFlopsPerStep: { readonly input: number; readonly weight: number };
  readonly modelStateBytesPerParam: number;
  readonly modelStateBytesPerParamSplit: StateBytesPerParam;
  /** Model state on each device of a data-parallel group spanning the whole cluster. */
  readonly modelStateBytesPerDevice: Readonly<Record<ShardStrategy, number>>;
  readonly activationBytesPerMicroBatch: { readonly full: number; readonly checkpointed: number };
  /** Forward + backward of the global batch on one device (no parallelism, no optimizer step). */
  readonly secondsOnOneDevice: number;
  /** Ops whose times came from a calibration file. */
  readonly calibratedOps: number;
  readonly layers: readonly LayerEstimate[];
}

export function estimateModel(model: CheckedModel, cluster: Cluster): ModelEstimate {
  const train = model.train;
  if (!train) throw new EstimateError(`model ${model.name} has no train section: the cost needs its batch (and seq)`);
  const perStep: DimBindings = train.seq === undefined ? { B: train.batch } : { B: train.batch, S: train.seq };
  // Chunks (micro-batches) are the planner's choice, made later; until then a micro-batch is the whole batch.
  const microBatch = train.batch;
  const perMicroBatch: DimBindings = { ...perStep, B: microBatch };

  const flops = costGraph(model.graph, { cluster, precision: train.precision, bindings: perStep });
  const activations = activationMemory(buildTrainingGraph(model.graph, train), perMicroBatch, train.precision);
  const params = model.graph.parameterCount();
  const split = stateBytesPerParam(train.precision, train.optimizer, train.reduceDtype);

  const layers = flops.layers.map((l): LayerEstimate => {
    const a = activations.layers[l.index]!;
    return {
      index: l.index,
      name: l.name,
      parameters: l.parameters,
      forwardFlops: l.forwardFlops,
      backwardFlops: l.backwardFlops,
      activationBytes: a.savedBytes,
      checkpointedActivationBytes: a.boundaryBytes,
      seconds: l.forwardSeconds + l.backwardSeconds,
    };
  });
  const sum = (f: (l: LayerEstimate) => number): number => layers.reduce((n, l) => n + f(l), 0);
  const forward = sum((l) => l.forwardFlops);
  const backward = { input: sum((l) => l.backwardFlops.input), weight: sum((l) => l.backwardFlops.weight) };
  const perDevice = Object.fromEntries(
    SHARD_STRATEGIES.map((s) => [s, modelStateBytes(params, cluster.devices, s, train.precision, train.optimizer, train.reduceDtype)]),
  ) as Record<ShardStrategy, number>;
  return {
    model: model.name,
    cluster: {
      name: cluster.profile.name,
      description: cluster.profile.description,
      devices: cluster.devices,
      nodes: cluster.nodes,
      devicesPerNode: cluster.profile.devicesPerNode,
    },
    batch: train.batch,
    seq: train.seq ?? null,
    microBatch,
    precision: train.precision,
    optimizer: train.optimizer.kind,
    parameters: params,
    flopsPerStep: forward + backward.input + backward.weight,
    forwardFlopsPerStep: forward,
    backwardFlopsPerStep: backward,
    modelStateBytesPerParam: totalBytesPerParam(split),
    modelStateBytesPerParamSplit: split,
    modelStateBytesPerDevice: perDevice,
    activationBytesPerMicroBatch: { full: activations.totalBytes, checkpointed: activations.checkpointedBytes },
    secondsOnOneDevice: sum((l) => l.seconds),
    calibratedOps: flops.calibratedOps,
    layers,
  };
}
