// Per-layer compute seconds of a stage from the cost model, split the way the overlap model runs them.
import { costGraph, type CostOptions } from "../cost/graph-cost.js";
import type { Graph } from "../graph/graph.js";
import { checkLayerRange } from "./stage-params.js";
import type { LayerRange } from "./types.js";

/** Seconds of one layer for one micro-batch: forward, input-gradient backward, weight-gradient backward. */
export interface LayerSeconds {
  readonly forward: number;
  readonly backward: number;
  readonly weightGrad: number;
}

/**
 * costGraph's per-layer times at `options.bindings` (pass one micro-batch's B). The cost model gives one
 * backward time per op; it is split between input and weight gradients in proportion to their FLOPs.
 */
export function layerSecondsFromCost(graph: Graph, layers: LayerRange, options: CostOptions): LayerSeconds[] {
  checkLayerRange(graph, layers);
  return costGraph(graph, options)
    .layers.slice(layers.start, layers.end)
    .map((l) => {
      const flops = l.backwardFlops.input + l.backwardFlops.weight;
      const weightShare = flops > 0 ? l.backwardFlops.weight / flops : 0;
      return { forward: l.forwardSeconds, backward: l.backwardSeconds * (1 - weightShare), weightGrad: l.backwardSeconds * weightShare };
    });
}
