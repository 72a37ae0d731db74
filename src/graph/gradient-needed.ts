// Which tensors of a forward graph the backward must give a gradient: those on a float path from a parameter
// to the loss. Autodiff differentiates exactly these; the checker refuses a loss that no parameter reaches.
import type { Graph, OpNode, TensorId } from "./graph.js";
import { isFloatDType } from "./types.js";

/** need[t] = 1 when t is a float tensor that depends on a parameter and the loss depends on t. */
export function gradientNeeded(g: Graph, ops: readonly OpNode[], loss: TensorId): Uint8Array {
  const n = g.tensors().length;
  const dependsOnParam = new Uint8Array(n);
  for (const p of g.params()) if (isFloatDType(p.type.dtype)) dependsOnParam[p.tensor] = 1;
  for (const o of ops) {
    if (!o.inputs.some((t) => dependsOnParam[t])) continue;
    for (const t of o.outputs) if (isFloatDType(g.tensor(t).type.dtype)) dependsOnParam[t] = 1;
  }
  const reachesLoss = new Uint8Array(n);
  reachesLoss[loss] = 1;
  for (let i = ops.length - 1; i >= 0; i--) {
    const o = ops[i]!;
    if (o.outputs.some((t) => reachesLoss[t])) for (const t of o.inputs) reachesLoss[t] = 1;
  }
  const need = new Uint8Array(n);
  for (let t = 0; t < n; t++) need[t] = dependsOnParam[t]! & reachesLoss[t]!;
  return need;
}
