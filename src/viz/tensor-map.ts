// The tensor-parallel side of the shard map: a group is consecutive ranks r..r+n−1 (plan.ts meshRank), and
// of each of a stage's parameters every tensor rank holds either its slice (tensor-slices.ts) or the whole
// (replicated over the group). The plan's graph is tensor rank 0's, so its shapes are one rank's slices.
import { wholeShape } from "../graph/param-split.js";
import type { Plan, PlanParam } from "../plan/plan.js";
import { sliceText, splitText } from "./tensor-slices.js";
import type { LayerGroup, TensorParam, TensorShard } from "./view-types.js";

/** Every device of these ranks' tensor-parallel groups (the ranks being tensor rank 0's), in rank order. */
export function tensorDevices(ranks: readonly number[], degree: number): number[] {
  return ranks.flatMap((r) => Array.from({ length: degree }, (_, t) => r + t));
}

function paramRow(plan: Plan, p: PlanParam, name: string): TensorParam {
  const local = plan.graph.tensors[p.tensor]!.shape.map(Number);
  const split = p.split;
  const shape = (split ? wholeShape(local, split) : local).join("×");
  if (!split) return { name, shape, split: "replicated", slices: [] };
  const dims = local.length;
  return { name, shape, split: splitText(split, dims), slices: Array.from({ length: split.parts }, (_, t) => sliceText(split, dims, t)) };
}

/** A layer's parameters, then the weights it uses that another layer declares (`lm_head.weight =
 *  wte.weight`), named from `prefix` on (the layer's name and a dot, or nothing). */
function layerRows(plan: Plan, l: number, byName: ReadonlyMap<string, PlanParam>, prefix: string): TensorParam[] {
  const layer = plan.graph.layers[l]!;
  const own = `${layer.name}.`;
  const rel = (name: string) => (name.startsWith(own) ? `${prefix}${name.slice(own.length)}` : name);
  const rows = layer.params.map((name) => paramRow(plan, byName.get(name)!, rel(name)));
  for (const p of plan.graph.params) {
    for (const a of p.aliases) if (a.startsWith(own)) rows.push(paramRow(plan, p, `${rel(a)} = ${p.name}`));
  }
  return rows;
}

/** A run of repeated blocks lists its parameters once when every block's read alike, else block by block. */
function groupRows(plan: Plan, g: LayerGroup, byName: ReadonlyMap<string, PlanParam>): TensorParam[] {
  const each = g.names.map((_, i) => layerRows(plan, g.first + i, byName, ""));
  const alike = each.every((rows) => JSON.stringify(rows) === JSON.stringify(each[0]));
  if (g.names.length > 1 && alike) return each[0]!.map((r) => ({ ...r, name: `${g.names[0]} .. ${g.names[g.names.length - 1]}: ${r.name}` }));
  return g.names.flatMap((name, i) => layerRows(plan, g.first + i, byName, `${name}.`));
}

/** The tensor-parallel map of a stage; undefined without tensor parallelism. */
export function tensorShard(plan: Plan, stage: number, groups: readonly LayerGroup[]): TensorShard | undefined {
  const degree = plan.settings.tensorParallel;
  if (degree <= 1) return undefined;
  const byName = new Map(plan.graph.params.map((p) => [p.name, p]));
  return {
    degree,
    groups: plan.shard[stage]!.ranks.map((r) => tensorDevices([r], degree)),
    holds: "tensor rank t holds part t of each block of every split parameter's axis, and the replicated parameters whole",
    params: groups.filter((g) => g.stage === stage).flatMap((g) => groupRows(plan, g, byName)),
  };
}
