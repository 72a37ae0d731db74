// The op registry: every built-in op, listed once. Adding an op = one file in ops/ plus one line here.
import type { OpDef } from "./op-def.js";
import { add } from "./ops/add.js";
import { attention } from "./ops/attention.js";
import { cross_entropy } from "./ops/cross_entropy.js";
import { div } from "./ops/div.js";
import { embedding } from "./ops/embedding.js";
import { gelu } from "./ops/gelu.js";
import { layer_norm } from "./ops/layer_norm.js";
import { linear } from "./ops/linear.js";
import { matmul } from "./ops/matmul.js";
import { mse_loss } from "./ops/mse_loss.js";
import { mul } from "./ops/mul.js";
import { positions } from "./ops/positions.js";
import { relu } from "./ops/relu.js";
import { reshape } from "./ops/reshape.js";
import { rms_norm } from "./ops/rms_norm.js";
import { scale } from "./ops/scale.js";
import { silu } from "./ops/silu.js";
import { softmax } from "./ops/softmax.js";
import { sub } from "./ops/sub.js";
import { transpose } from "./ops/transpose.js";
// Internal ops: emitted by the autodiff pass (gradients, the loss seed) and for the optimizer step.
import { adam_update } from "./ops/adam_update.js";
import { attention_grad_input } from "./ops/attention_grad_input.js";
import { clip_coef } from "./ops/clip_coef.js";
import { cross_entropy_grad } from "./ops/cross_entropy_grad.js";
import { div_grad_b } from "./ops/div_grad_b.js";
import { embedding_grad_weight } from "./ops/embedding_grad_weight.js";
import { fill } from "./ops/fill.js";
import { gelu_grad } from "./ops/gelu_grad.js";
import { global_norm } from "./ops/global_norm.js";
import { layer_norm_grad_input } from "./ops/layer_norm_grad_input.js";
import { layer_norm_grad_weight } from "./ops/layer_norm_grad_weight.js";
import { linear_grad_input } from "./ops/linear_grad_input.js";
import { linear_grad_weight } from "./ops/linear_grad_weight.js";
import { mse_loss_grad } from "./ops/mse_loss_grad.js";
import { relu_grad } from "./ops/relu_grad.js";
import { rms_norm_grad_input } from "./ops/rms_norm_grad_input.js";
import { rms_norm_grad_weight } from "./ops/rms_norm_grad_weight.js";
import { sgd_update } from "./ops/sgd_update.js";
import { silu_grad } from "./ops/silu_grad.js";
import { softmax_grad } from "./ops/softmax_grad.js";
import { step_increment } from "./ops/step_increment.js";
import { sum_squares } from "./ops/sum_squares.js";
import { sum_to } from "./ops/sum_to.js";
// Tensor-parallel ops: emitted into the forward graph by the tensor-parallel pass (src/passes/tensor-parallel.ts).
import { tp_all_gather } from "./ops/tp_all_gather.js";
import { tp_all_reduce } from "./ops/tp_all_reduce.js";
import { tp_copy } from "./ops/tp_copy.js";
import { tp_reduce_scatter } from "./ops/tp_reduce_scatter.js";
import { tp_seq_gather } from "./ops/tp_seq_gather.js";
import { tp_slice } from "./ops/tp_slice.js";

const byName = (a: OpDef, b: OpDef): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

const ALL: readonly OpDef[] = [
  add, attention, cross_entropy, div, embedding, gelu, layer_norm, linear, matmul, mse_loss,
  mul, positions, relu, reshape, rms_norm, scale, silu, softmax, sub, transpose,
  adam_update, attention_grad_input, clip_coef, cross_entropy_grad, div_grad_b, embedding_grad_weight, fill,
  gelu_grad, global_norm, layer_norm_grad_input, layer_norm_grad_weight, linear_grad_input, linear_grad_weight,
  mse_loss_grad, relu_grad, rms_norm_grad_input, rms_norm_grad_weight, sgd_update, silu_grad, softmax_grad,
  step_increment, sum_squares, sum_to, tp_all_gather, tp_all_reduce, tp_copy, tp_reduce_scatter, tp_seq_gather, tp_slice,
].sort(byName);

const LANGUAGE: readonly OpDef[] = ALL.filter((d) => d.kind !== "internal");

const BY_NAME: ReadonlyMap<string, OpDef> = new Map(ALL.map((d) => [d.name, d]));

/** Any op by name, internal ones included (the checker accepts only kinds `function` and `module`). */
export function getOp(name: string): OpDef | undefined {
  return BY_NAME.get(name);
}

/** An op that .fsm source may name (module or function); internal ops (gradients, updates) are not. */
export function languageOp(name: string): OpDef | undefined {
  const op = BY_NAME.get(name);
  return op && op.kind !== "internal" ? op : undefined;
}

/** Every op, internal ones included, sorted by name (for tools that describe graphs, e.g. a reference of all ops). */
export function allOps(): readonly OpDef[] {
  return ALL;
}

/** The ops callable from .fsm source (kinds `function` and `module`), sorted by name: `fsm ops`, the
 *  language reference and the checker's "did you mean" suggestions. */
export function languageOps(): readonly OpDef[] {
  return LANGUAGE;
}

/** Names of the ops callable from .fsm source, sorted. */
export function opNames(): string[] {
  return LANGUAGE.map((d) => d.name);
}

export { withDefaults } from "./ops/shape-rules.js";
