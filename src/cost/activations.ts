// Activation memory per micro-batch and layer, from the autodiff pass's saved-tensor summary: the forward
// tensors the backward ops read (kept from forward to backward), evaluated at the micro-batch's symbol values
// on the device's dtypes. With activation checkpointing a layer keeps only its boundary inputs, and one
// layer's full set exists again while it is recomputed for its backward.
import type { Precision } from "../check/settings-types.js";
import type { Graph, TensorId } from "../graph/graph.js";
import type { DimBindings } from "../graph/op-cost.js";
import { bytesOf } from "../graph/ops/cost-rules.js";
import { savedByLayer } from "../passes/autodiff.js";
import { onDevice } from "./precision.js";

export interface LayerActivations {
  readonly index: number;
  readonly name: string;
  /** Bytes of the forward tensors this layer's gradient ops read. A tensor several layers read counts once,
   *  in the first of them, so the column sums to the true total. */
  readonly savedBytes: number;
  /** Bytes of the layer's inputs from outside it (other layers' outputs, model inputs): all a checkpointed
   *  layer keeps. Counted once, in the first layer that reads it, like savedBytes. */
  readonly boundaryBytes: number;
}

export interface ActivationMemory {
  readonly layers: readonly LayerActivations[];
  /** No checkpointing: every layer's saved tensors. */
  readonly totalBytes: number;
  /** Every layer checkpointed: every layer's boundary inputs, plus the largest layer's saved tensors while it
   *  is recomputed. */
  readonly checkpointedBytes: number;
}

/** `training` is the graph buildTrainingGraph returns; `bindings` the micro-batch's symbol values. */
export function activationMemory(training: Graph, bindings: DimBindings, precision: Precision): ActivationMemory {
  const bytes = (t: TensorId): number => bytesOf(onDevice(training.tensor(t).type, precision), bindings);
  // Each tensor counts once per column: in the first layer that saves it, the first that reads it in.
  const firstOnly = (seen: Set<TensorId>, ts: readonly TensorId[]): number =>
    ts.reduce((n, t) => (seen.has(t) ? n : (seen.add(t), n + bytes(t))), 0);
  const savedSeen = new Set<TensorId>();
  const boundarySeen = new Set<TensorId>();
  const names = training.layers();
  let largest = 0;
  const layers = savedByLayer(training).map((s): LayerActivations => {
    // Recomputing a layer rebuilds all it saves, shared tensors included.
    largest = Math.max(largest, s.saved.reduce((n, t) => n + bytes(t), 0));
    return {
      index: s.layer,
      name: names[s.layer]!.name,
      savedBytes: firstOnly(savedSeen, s.saved),
      boundaryBytes: firstOnly(boundarySeen, s.boundary),
    };
  });
  const totalBytes = layers.reduce((n, l) => n + l.savedBytes, 0);
  const checkpointedBytes = layers.reduce((n, l) => n + l.boundaryBytes, 0) + largest;
  return { layers, totalBytes, checkpointedBytes };
}
