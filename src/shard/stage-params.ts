// The parameters one stage holds as the shard planner sees them: sizes, the layer each is filed under, and when
// the stage's part of each gradient is complete in the training graph (which orders gradient buckets).
import type { Graph } from "../graph/graph.js";
import { paramUses, type ParamUse } from "./sharing.js";
import type { LayerRange } from "./types.js";

export interface StageParam {
  readonly name: string;
  /** Index in the graph's declaration order. */
  readonly index: number;
  /** The layer the stage files it under: its declaring layer when the stage has it, else its first use in the
   *  stage (a replica of a weight declared on another stage sits with the layer that reads it). */
  readonly layer: number;
  readonly numel: number;
  /** Layers of the stage whose forward ops read it, ascending. */
  readonly useLayers: readonly number[];
  /** Layer of the op that completes the stage's part of the gradient (its last accumulation here); undefined
   *  when untrained. For a weight read on one stage only that is the whole gradient. */
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

export const inRange = (r: LayerRange, layer: number): boolean => layer >= r.start && layer < r.end;

/** Whether the stage holds the parameter: it reads it, or nobody reads it and the stage declares it. */
export function holds(u: ParamUse, layers: LayerRange): boolean {
  return u.useLayers.length > 0 ? u.useLayers.some((l) => inRange(layers, l)) : inRange(layers, u.layer);
}

/**
 * Parameters the stage holds, in declaration order: those its forward ops read (including weights declared
 * on other stages: every stage that reads a tied weight keeps a replica) and unread ones declared in it.
 * Throws when a stage reads a trained weight but computes no part of its gradient: its replica would need
 * the others' gradient without adding to it, which the tied all-reduce does not model.
 */
export function stageParams(graph: Graph, layers: LayerRange, uses: readonly ParamUse[] = paramUses(graph)): StageParam[] {
  if (!graph.isTraining()) {
    throw new Error(`internal: shard planning needs the training graph of '${graph.model}' (buildTrainingGraph), not its forward graph`);
  }
  checkLayerRange(graph, layers);
  const out: StageParam[] = [];
  for (const u of uses) {
    if (!holds(u, layers)) continue;
    // Shard plans hang gradient collectives after weight_grad ops; autodiff puts every parameter gradient there.
    if (u.gradOp !== undefined && graph.op(u.gradOp).phase !== "weight_grad") {
      throw new Error(`internal: the gradient of '${u.name}' is produced by a ${graph.op(u.gradOp).phase} op, not a weight_grad op`);
    }
    const local = u.gradOps.filter((o) => inRange(layers, graph.op(o).layer));
    if (u.gradOps.length > 0 && local.length === 0) {
      throw new Error(
        `not implemented: stage layers [${layers.start}, ${layers.end}) read '${u.name}' but no part of its gradient is computed there ` +
          `(it is built in layers ${[...new Set(u.gradOps.map((o) => graph.op(o).layer))].join(", ")})`,
      );
    }
    const gradOp = local.length > 0 ? local[local.length - 1]! : undefined;
    const useLayers = u.useLayers.filter((l) => inRange(layers, l));
    out.push({
      name: u.name,
      index: u.index,
      layer: inRange(layers, u.layer) ? u.layer : useLayers[0]!,
      numel: u.numel,
      useLayers,
      gradLayer: gradOp === undefined ? undefined : graph.op(gradOp).layer,
      gradOp,
    });
  }
  return out;
}

/** Trained parameters in the order their gradients become ready (back to front in a sequential model). */
export function gradientReadyOrder(params: readonly StageParam[]): StageParam[] {
  return params.filter((p) => p.gradOp !== undefined).sort((a, b) => a.gradOp! - b.gradOp! || a.index - b.index);
}
