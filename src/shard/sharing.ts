// Where each parameter is used across pipeline stages: the layers whose forward ops read it, the weight_grad
// ops that build its gradient, and the stage layout that turns layers into stages. A parameter read on several
// stages (a tied embedding) is held by every one of them (see tied.ts).
import { numel } from "../graph/dim.js";
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import type { LayerRange } from "./types.js";

export interface ParamUse {
  /** Index in the graph's declaration order. */
  readonly index: number;
  /** Canonical name. */
  readonly name: string;
  readonly aliases: readonly string[];
  /** Layer that declares it. */
  readonly layer: number;
  readonly numel: number;
  /** Layers of the forward ops that read it, ascending, no repeats. */
  readonly useLayers: readonly number[];
  /** Op completing the whole gradient (its last accumulation); undefined when untrained. */
  readonly gradOp: OpId | undefined;
  /** Every weight_grad op the gradient is built from (each use's contribution and the adds that sum them),
   *  ascending ids; empty when untrained. Contributions sit in the layer of the use they differentiate. */
  readonly gradOps: readonly OpId[];
}

/** Used elsewhere than where it is declared, or by several layers, or under another name: a shared weight. */
export function isShared(u: ParamUse): boolean {
  return u.aliases.length > 0 || u.useLayers.some((l) => l !== u.layer);
}

export function paramUses(graph: Graph): ParamUse[] {
  return graph.params().map((p, index) => {
    const useLayers = [...new Set(graph.consumers(p.tensor).map((o) => graph.op(o)).filter((o) => o.phase === "forward").map((o) => o.layer))];
    const grad = graph.paramGrad(p.name);
    const gradOp = grad === undefined ? undefined : graph.tensor(grad).producer;
    return {
      index,
      name: p.name,
      aliases: p.aliases,
      layer: p.layer,
      numel: numel(p.type.shape),
      useLayers: useLayers.sort((a, b) => a - b),
      gradOp,
      gradOps: grad === undefined ? [] : gradientOps(graph, grad),
    };
  });
}

/** The weight_grad ops upstream of gradient tensor `t` through weight_grad ops only: backward and forward
 *  outputs they read are inputs of the contribution, not part of the accumulation. */
function gradientOps(graph: Graph, t: TensorId): OpId[] {
  const seen = new Set<OpId>();
  const stack = [t];
  while (stack.length > 0) {
    const producer = graph.tensor(stack.pop()!).producer;
    if (producer === undefined || seen.has(producer)) continue;
    const op = graph.op(producer);
    if (op.phase !== "weight_grad") continue;
    seen.add(producer);
    stack.push(...op.inputs);
  }
  return [...seen].sort((a, b) => a - b);
}

/**
 * Stage of every layer from the layer ranges of all (virtual) stages, by stage index: they must be
 * consecutive, non-empty and cover every layer, as a pipeline cuts a layer sequence.
 */
export function layerStages(graph: Graph, stages: readonly LayerRange[]): number[] {
  const n = graph.layers().length;
  let next = 0;
  const out: number[] = [];
  stages.forEach((r, s) => {
    if (!(Number.isInteger(r.start) && Number.isInteger(r.end) && r.start === next && r.end > r.start)) {
      throw new Error(
        `internal: pipeline stage ${s} has layers [${r.start}, ${r.end}); stages must cut the ${n} layers of '${graph.model}' in order from layer ${next}`,
      );
    }
    for (let l = r.start; l < r.end; l++) out.push(s);
    next = r.end;
  });
  if (next !== n) throw new Error(`internal: the pipeline stages end at layer ${next}, but '${graph.model}' has ${n} layers`);
  return out;
}

/** Stages holding a copy: every stage with a use; an unused parameter stays with its declaring layer's stage. */
export function holderStages(u: ParamUse, stageOf: readonly number[]): number[] {
  const layers = u.useLayers.length > 0 ? u.useLayers : [u.layer];
  return [...new Set(layers.map((l) => stageOf[l]!))].sort((a, b) => a - b);
}
