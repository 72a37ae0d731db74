// The parameters of one stage as the shard planner sees them: sizes, layers, and when each gradient is complete
// in the training graph (which orders gradient buckets), plus the weights tied across stage boundaries.
import { numel } from "../graph/dim.js";
import type { Graph } from "../graph/graph.js";
import type { LayerRange } from "./types.js";

export interface StageParam {
  readonly name: string;
  /** Index in the graph's declaration order. */
  readonly index: number;
  readonly layer: number;
  readonly numel: number;
  /** Layer of the op that completes the gradient (its last accumulation); undefined when untrained. */
  readonly gradLayer: number | undefined;
  /** Id of that op: ops run in id order, so ascending ids are the order gradients become ready. */
  readonly gradOp: number | undefined;
}

export function checkLayerRange(graph: Graph, layers: LayerRange): void {
  const n = graph.layers().length;
  if (!(Number.isInteger(layers.start) && Number.isInteger(layers.end) && 0 <= layers.start && layers.start < layers.end && layers.end <= n)) {
    throw new Error(`internal: stage layers [${layers.start}, ${layers.end}) are not a non-empty range of the ${n} layers of '${graph.model}'`);
  }
}

const inRange = (r: LayerRange, layer: number): boolean => layer >= r.start && layer < r.end;

/** Parameters declared in the stage's layers, in declaration order. Throws when a gradient is completed in
 *  a layer outside the stage: the stage could not know when to reduce it. */
export function stageParams(graph: Graph, layers: LayerRange): StageParam[] {
  if (!graph.isTraining()) {
    throw new Error(`internal: shard planning needs the training graph of '${graph.model}' (buildTrainingGraph), not its forward graph`);
  }
  checkLayerRange(graph, layers);
  const out: StageParam[] = [];
  graph.params().forEach((p, index) => {
    if (!inRange(layers, p.layer)) return;
    const g = graph.paramGrad(p.name);
    const gradOp = g === undefined ? undefined : graph.tensor(g).producer;
    const gradLayer = gradOp === undefined ? undefined : graph.op(gradOp).layer;
    // Shard plans hang gradient collectives after weight_grad ops; autodiff puts every parameter gradient there.
    if (gradOp !== undefined && graph.op(gradOp).phase !== "weight_grad") {
      throw new Error(`internal: the gradient of '${p.name}' is produced by a ${graph.op(gradOp).phase} op, not a weight_grad op`);
    }
    if (gradLayer !== undefined && !inRange(layers, gradLayer)) {
      throw new Error(
        `not implemented: the gradient of '${p.name}' (layer ${p.layer}) is completed in layer ${gradLayer}, outside the stage's layers ` +
          `[${layers.start}, ${layers.end})`,
      );
    }
    out.push({ name: p.name, index, layer: p.layer, numel: numel(p.type.shape), gradLayer, gradOp });
  });
  return out;
}

/** Trained parameters in the order their gradients become ready (back to front in a sequential model). */
export function gradientReadyOrder(params: readonly StageParam[]): StageParam[] {
  return params.filter((p) => p.gradOp !== undefined).sort((a, b) => a.gradOp! - b.gradOp! || a.index - b.index);
}

/** Names of parameters read by forward ops on both sides of the stage boundary (tied weights). */
export function crossStageParams(graph: Graph, layers: LayerRange): string[] {
  const out = new Set<string>();
  for (const o of graph.ops()) {
    if (o.phase !== "forward") continue;
    for (const t of o.inputs) {
      const info = graph.tensor(t);
      if (info.kind !== "param") continue;
      const p = graph.param(info.name);
      if (p && inRange(layers, p.layer) !== inRange(layers, o.layer)) out.add(p.name);
    }
  }
  return [...out].sort();
}
