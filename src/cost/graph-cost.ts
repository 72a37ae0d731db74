// Costs a graph's forward ops one by one at given symbol values: each op's registry cost rule (FLOPs, bytes)
// on its operands as they live on the device, then its forward and backward time from the calibration when
// that op and shape were measured, else from the roofline; summed per layer.
import type { Precision } from "../check/settings-types.js";
import type { Graph, OpId } from "../graph/graph.js";
import { layerKinds } from "../graph/layer-kinds.js";
import type { DimBindings, OpCost } from "../graph/op-cost.js";
import { getOp, withDefaults } from "../graph/registry.js";
import { calibrated, shapeKey } from "./calibration.js";
import type { Cluster } from "./cluster.js";
import { computeDType, onDevice } from "./precision.js";
import { backwardWork, forwardWork, roofline } from "./roofline.js";
import { numel } from "../graph/dim.js";
import { collectiveTime, interNodeLink, intraNodeLink, withCalibration } from "./collectives.js";
import { calibratedOpSeconds } from "./calibrated-pricing.js";

export interface CostOptions {
  readonly cluster: Cluster;
  readonly precision: Precision;
  /** Symbol values to evaluate at, e.g. {B: global batch, S: sequence} for FLOPs per step. */
  readonly bindings: DimBindings;
}

export interface OpEstimate {
  readonly op: OpId;
  readonly cost: OpCost;
  /** Seconds on one device of the cluster's profile. */
  readonly forwardSeconds: number;
  readonly backwardSeconds: number;
  /** The times come from the calibration file rather than the roofline. */
  readonly calibrated: boolean;
}

export interface LayerCost {
  readonly index: number;
  readonly name: string;
  /** Parameters the layer owns (a tied weight counts in the layer that declares it). */
  readonly parameters: number;
  readonly forwardFlops: number;
  readonly backwardFlops: { readonly input: number; readonly weight: number };
  /** Forward bytes read + written. */
  readonly forwardBytes: number;
  readonly forwardSeconds: number;
  readonly backwardSeconds: number;
}

export interface GraphCost {
  readonly ops: readonly OpEstimate[];
  readonly layers: readonly LayerCost[];
  /** Ops whose times came from the calibration. */
  readonly calibratedOps: number;
}

/** One op at the given options. Throws (an internal error) for an op without a cost rule. */
export function estimateOp(graph: Graph, id: OpId, options: CostOptions): OpEstimate {
  const node = graph.op(id);
  const def = getOp(node.op);
  if (!def?.cost) throw new Error(`internal: op '${node.op}' has no cost rule in the registry`);
  const inputs = node.inputs.map((t) => onDevice(graph.tensor(t).type, options.precision));
  const attrs = withDefaults(def.attrs, node.attrs);
  const cost = def.cost(inputs, attrs, options.bindings);
  // The shape key only where there is a calibration to look it up in (it is the op's costliest part).
  const calibration = options.cluster.calibration;
  const measured = calibration && calibrated(calibration, node.op, shapeKey(inputs, attrs, options.bindings));
  if (measured) {
    // A calibration measures one device's kernels (version 2: with one core and with all, and the dispatch
    // per instruction, shared out among the cluster's devices); the group's collectives are priced on top.
    const times = calibratedOpSeconds(options.cluster, measured);
    const forwardSeconds = times.forward + collectiveSeconds(cost, "forward", options.cluster);
    return { op: id, cost, forwardSeconds, backwardSeconds: times.backward + collectiveSeconds(cost, "backward", options.cluster), calibrated: true };
  }
  // Arithmetic runs in the dtype of the op's float operands on the device (integer-only ops: i32).
  const dtype = inputs.some((t) => t.dtype !== "i32") ? computeDType(options.precision) : "i32";
  const device = options.cluster.profile;
  return {
    op: id,
    cost,
    forwardSeconds: roofline(forwardWork(cost, dtype), device).seconds + collectiveSeconds(cost, "forward", options.cluster),
    backwardSeconds: roofline(backwardWork(cost, dtype), device).seconds + collectiveSeconds(cost, "backward", options.cluster),
    calibrated: false,
  };
}

/** The collectives an op waits for in one direction (tensor-parallel ops). A tensor-parallel group is
 *  consecutive ranks, inside a node unless it is larger than one (the search keeps it inside; an explicit
 *  larger degree pays the inter-node link). */
function collectiveSeconds(cost: OpCost, phase: "forward" | "backward", cluster: Cluster): number {
  if (!cost.collectives) return 0;
  const size = cost.collectives.groupSize;
  const link = withCalibration(size <= cluster.profile.devicesPerNode ? intraNodeLink(cluster.profile) : interNodeLink(cluster.profile), cluster);
  let s = 0;
  for (const c of cost.collectives.list) if (c.phase === phase) s += collectiveTime(c.kind, c.bytes, cost.collectives.groupSize, link);
  return s;
}

/** Every forward op of `graph` (a forward or a training graph: gradient and optimizer ops are costed through
 *  the forward op they belong to, so they are skipped), and the per-layer sums. */
export function costGraph(graph: Graph, options: CostOptions): GraphCost {
  // One estimate per kind of layer (layer-kinds.ts): a deep model's repeated blocks are costed once, and
  // their other layers' ops take the same figures position by position.
  const { kindOf, representative, forwardOps } = layerKinds(graph);
  const perKind = representative.map((rep) => forwardOps[rep]!.map((id) => estimateOp(graph, id, options)));
  const byId = new Map<OpId, OpEstimate>();
  forwardOps.forEach((ids, l) => {
    const same = perKind[kindOf[l]!]!;
    ids.forEach((id, i) => byId.set(id, same[i]!.op === id ? same[i]! : { ...same[i]!, op: id }));
  });
  const ops = graph.ops().filter((o) => o.phase === "forward").map((o) => byId.get(o.id)!);
  const layers = graph.layers().map((l): LayerCost => {
    let forwardFlops = 0;
    let input = 0;
    let weight = 0;
    let forwardBytes = 0;
    let forwardSeconds = 0;
    let backwardSeconds = 0;
    for (const id of l.ops) {
      const e = byId.get(id);
      if (!e) continue;
      forwardFlops += e.cost.forwardFlops;
      input += e.cost.backwardFlops.input;
      weight += e.cost.backwardFlops.weight;
      forwardBytes += e.cost.bytesRead + e.cost.bytesWritten;
      forwardSeconds += e.forwardSeconds;
      backwardSeconds += e.backwardSeconds;
    }
    const parameters = l.params.reduce((n, p) => n + numel(graph.param(p)!.type.shape), 0);
    return { index: l.index, name: l.name, parameters, forwardFlops, backwardFlops: { input, weight }, forwardBytes, forwardSeconds, backwardSeconds };
  });
  return { ops, layers, calibratedOps: ops.filter((o) => o.calibrated).length };
}
