// The interpreter for one tensor-parallel group: every rank of the group runs the same (split) graph, op by
// op in lockstep, each on its own values; a collective (or the vocabulary-parallel loss) sees all ranks'
// operands at once. This is the reference for the tensor-parallel pass: run on the ranks' slices of the
// whole model's parameters, it must give the whole model's loss and, sliced, its gradients.
import type { Graph, OpNode, Phase, TensorId } from "../graph/graph.js";
import { partsOf } from "../graph/ops/tensor-parallel-rules.js";
import { GROUP_KERNELS } from "./kernels/tensor-parallel.js";
import { kernelFor } from "./kernels/index.js";
import { bindDims, kernelContext, operandValues, storeOutputs, type RunOptions } from "./run.js";
import { GRADIENT_PHASES, PHASES, type Batch, type StepResult, type TrainingSession } from "./session.js";
import type { FloatTensor, Tensor } from "./tensor.js";

/** Runs `ops` on every rank: `values[k]` holds rank k's operands and receives its outputs. */
export function runTensorParallelOps(g: Graph, ops: Iterable<OpNode>, values: readonly Map<TensorId, Tensor>[], opts: RunOptions): void {
  for (const o of ops) {
    const ctx = kernelContext(g, o, opts);
    const group = partsOf(o.attrs) > 1 ? GROUP_KERNELS[o.op] : undefined;
    if (group) {
      if (partsOf(o.attrs) !== values.length) throw new Error(`internal: op ${o.id} (${o.op}) is split ${partsOf(o.attrs)} ways, the group has ${values.length} ranks`);
      const outs = group(values.map((v) => operandValues(g, o, v)), o.attrs, ctx);
      outs.forEach((out, k) => storeOutputs(g, o, out, values[k]!, ctx));
      continue;
    }
    values.forEach((v, k) => storeOutputs(g, o, kernelFor(o.op)(operandValues(g, o, v), o.attrs, { ...ctx, tensorRank: k }), v, ctx));
  }
}

/** One tensor-parallel group on the interpreter: a TrainingSession per rank (each with its rank's slices of
 *  the parameters), run in lockstep. */
export class TensorParallelGroup {
  constructor(readonly ranks: readonly TrainingSession[]) {
    if (ranks.length < 2) throw new Error("internal: a tensor-parallel group needs at least two ranks");
  }

  /** Forward, backward and weight gradients on every rank: each rank's loss and gradients. */
  gradients(batch: Batch): { loss: number; grads: Map<string, FloatTensor> }[] {
    return this.run(batch, GRADIENT_PHASES).map((v, k) => this.ranks[k]!.gradientsOf(v));
  }

  /** A whole training step on every rank. */
  step(batch: Batch): StepResult[] {
    return this.run(batch, PHASES).map((v, k) => this.ranks[k]!.apply(v));
  }

  private run(batch: Batch, phases: readonly Phase[]): Map<TensorId, Tensor>[] {
    const first = this.ranks[0]!;
    const values = this.ranks.map((s) => s.leaves(batch));
    runTensorParallelOps(first.graph, first.opsOf(phases), values, { bindings: bindDims(first.graph, batch), float: first.float });
    return values;
  }
}
