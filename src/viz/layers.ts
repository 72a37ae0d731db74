// The model graph as viz draws it: per-layer facts (stage, parameters, FLOPs, relative times), layers
// grouped into boxes (a run of repeated blocks of one stage is one box) and the data flow between boxes.
import type { Precision } from "../check/settings-types.js";
import { ClusterError, clusterFor, type Cluster } from "../cost/cluster.js";
import { groupCollectiveTime } from "../cost/collectives.js";
import { costGraph, type GraphCost } from "../cost/graph-cost.js";
import type { Graph } from "../graph/graph.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import type { Plan } from "../plan/plan.js";
import type { GroupEdge, LayerGroup } from "./view-types.js";

export interface LayerFacts {
  readonly name: string;
  readonly stage: number;
  readonly parameters: number;
  /** Model FLOPs of one micro-batch: forward + backward. */
  readonly flops: number;
  /** Roofline seconds of one micro-batch, only used to place a release inside a compute action. */
  readonly forwardSeconds: number;
  readonly backwardSeconds: number;
  /** The weight gradients' share of its backward FLOPs: how compile splits a backward into I and W. */
  readonly weightShare: number;
  /** Seconds of one micro-batch its tensor-parallel collectives take (forward, backward): 0 without them. */
  readonly tpSeconds: { readonly forward: number; readonly backward: number };
}

/** Runs at least this long collapse into one box (a single layer is its own box anyway). */
const MIN_RUN = 2;

function clusterOf(plan: Plan): Cluster {
  // FLOPs do not depend on the device; its profile only scales the relative times. A plan from a newer fsm
  // may name a profile this one lacks: any profile gives the same FLOPs, so fall back rather than fail.
  try {
    return clusterFor(plan.cluster.profile, plan.cluster.devices);
  } catch (e) {
    if (!(e instanceof ClusterError)) throw e;
    return clusterFor("cpu", plan.cluster.devices);
  }
}

export function layerFacts(plan: Plan): LayerFacts[] {
  const s = plan.settings;
  const graph = graphFromJson(plan.model.name, plan.graph);
  const bindings = s.seq === null ? { B: s.microBatchSize } : { B: s.microBatchSize, S: s.seq };
  const cluster = clusterOf(plan);
  const cost = costGraph(graph, { cluster, precision: s.precision as Precision, bindings });
  const stageOf = layerStages(plan);
  const tp = tpSeconds(graph, cost, cluster);
  return cost.layers.map((l) => {
    const backwardFlops = l.backwardFlops.input + l.backwardFlops.weight;
    return {
      name: l.name,
      stage: stageOf[l.index]!,
      parameters: l.parameters,
      flops: l.forwardFlops + backwardFlops,
      forwardSeconds: l.forwardSeconds,
      backwardSeconds: l.backwardSeconds,
      weightShare: backwardFlops > 0 ? l.backwardFlops.weight / backwardFlops : 0,
      tpSeconds: tp[l.index]!,
    };
  });
}

/** Per layer, the seconds of the collectives its ops wait for (cost.collectives: the tensor-parallel ops),
 *  priced over tensor rank 0's group 0..n−1, as the cost model prices them: inside a node unless the group
 *  is larger than one. */
function tpSeconds(graph: Graph, cost: GraphCost, cluster: Cluster): { forward: number; backward: number }[] {
  const out = cost.layers.map(() => ({ forward: 0, backward: 0 }));
  for (const e of cost.ops) {
    const c = e.cost.collectives;
    if (!c) continue;
    const group = Array.from({ length: c.groupSize }, (_, t) => t);
    const layer = out[graph.op(e.op).layer]!;
    for (const x of c.list) layer[x.phase] += groupCollectiveTime(cluster, x.kind, x.bytes, group);
  }
  return out;
}

/** The (virtual) stage of every layer. */
function layerStages(plan: Plan): number[] {
  const out = new Array<number>(plan.graph.layers.length).fill(-1);
  for (const st of plan.stages) for (let l = st.layers[0]; l <= st.layers[1]; l++) out[l] = st.index;
  return out;
}

/** `layers.7` → {prefix: "layers", index: 7} plus what must match for two layers to be repeats. */
function repeatKey(plan: Plan, facts: readonly LayerFacts[], l: number): { prefix: string; index: number; shape: string } | undefined {
  const name = plan.graph.layers[l]!.name;
  const m = /^(.+)\.(\d+)$/.exec(name);
  if (!m) return undefined;
  const shape = `${facts[l]!.parameters}:${plan.graph.layers[l]!.params.map((p) => p.slice(name.length)).join(",")}`;
  return { prefix: m[1]!, index: Number(m[2]), shape };
}

export function layerGroups(plan: Plan, facts: readonly LayerFacts[]): LayerGroup[] {
  const groups: LayerGroup[] = [];
  const n = plan.graph.layers.length;
  const keys = plan.graph.layers.map((_, l) => repeatKey(plan, facts, l));
  let i = 0;
  while (i < n) {
    let j = i;
    const key = keys[i];
    while (key && j + 1 < n && facts[j + 1]!.stage === facts[i]!.stage) {
      const next = keys[j + 1];
      if (!next || next.prefix !== key.prefix || next.shape !== key.shape || next.index !== key.index + (j + 1 - i)) break;
      j++;
    }
    if (j - i + 1 < MIN_RUN) j = i;
    groups.push(group(plan, facts, i, j));
    i = j + 1;
  }
  return groups;
}

function group(plan: Plan, facts: readonly LayerFacts[], first: number, last: number): LayerGroup {
  const names = plan.graph.layers.slice(first, last + 1).map((l) => l.name);
  const stage = facts[first]!.stage;
  const inGroup = (l: number) => l >= first && l <= last;
  const units = (plan.shard[stage]?.units ?? []).filter((u) => u.layers.some(inGroup)).map((u) => u.index);
  const tied: string[] = [];
  for (const p of plan.graph.params) {
    for (const a of p.aliases) if (names.some((name) => a.startsWith(`${name}.`))) tied.push(`${a} = ${p.name}`);
  }
  let parameters = 0;
  let flops = 0;
  for (let l = first; l <= last; l++) {
    parameters += facts[l]!.parameters;
    flops += facts[l]!.flops;
  }
  const label = first === last ? names[0]! : `${names[0]} .. ${names[names.length - 1]} (${last - first + 1} blocks)`;
  return { first, last, label, names, stage, parameters, flops, units, tied };
}

/** Forward data flow between groups: an edge wherever an op of one group reads a tensor another computed. */
export function groupEdges(plan: Plan, groups: readonly LayerGroup[]): GroupEdge[] {
  const groupOf = new Array<number>(plan.graph.layers.length);
  groups.forEach((g, gi) => {
    for (let l = g.first; l <= g.last; l++) groupOf[l] = gi;
  });
  const producerLayer = new Map<number, number>();
  for (const op of plan.graph.ops) if (op.phase === "forward") for (const t of op.outputs) producerLayer.set(t, op.layer);
  const seen = new Set<string>();
  const edges: GroupEdge[] = [];
  for (const op of plan.graph.ops) {
    if (op.phase !== "forward") continue;
    for (const t of op.inputs) {
      const from = producerLayer.get(t);
      if (from === undefined) continue;
      const a = groupOf[from]!;
      const b = groupOf[op.layer]!;
      if (a === b || seen.has(`${a}:${b}`)) continue;
      seen.add(`${a}:${b}`);
      edges.push({ from: a, to: b, crossStage: groups[a]!.stage !== groups[b]!.stage });
    }
  }
  return edges.sort((x, y) => x.from - y.from || x.to - y.to);
}
