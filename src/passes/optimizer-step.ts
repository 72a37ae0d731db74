// The optimizer phase of a training graph: optional clipping by global gradient norm, then one update op per
// parameter with a gradient, reading and replacing its optimizer state (see graph.ts for `updates`).
import type { TrainConfig } from "../check/settings-types.js";
import type { Graph, ParamInfo, TensorId } from "../graph/graph.js";
import { getOp, withDefaults } from "../graph/registry.js";
import type { Attrs, TensorType } from "../graph/types.js";

const SCALAR: TensorType = { dtype: "f32", shape: [] };

/**
 * Emits the optimizer ops after the gradients. Ops for one parameter sit in its layer and scope; the global
 * ones (norm, clip factor, step counter) in the last layer, where a pipeline finishes its backward.
 */
export function emitOptimizerStep(g: Graph, train: TrainConfig): void {
  const trained = g.params().filter((p) => g.paramGrad(p.name) !== undefined);
  const grads = trained.map((p) => g.paramGrad(p.name)!);
  const last = g.layers().length - 1;
  // One attributes object per kind of per-parameter op, its defaults filled in once (op() then keeps it as
  // is): a deep model has hundreds of thousands of these ops, all with the same attributes.
  const full = (name: string, attrs: Attrs): Attrs => withDefaults(getOp(name)!.attrs, attrs);
  const op = (name: string, inputs: readonly TensorId[], attrs: Attrs, types: readonly TensorType[], at: { layer: number; scope: string }, update = false) =>
    g.addOp({
      op: name,
      attrs: full(name, attrs),
      inputs,
      outputTypes: types,
      scope: at.scope,
      layer: at.layer,
      phase: "optimizer",
      ...(update && { outputKind: "update" as const }),
    });
  const global = { layer: last, scope: "" };

  // torch.nn.utils.clip_grad_norm_: total = ‖(‖g_1‖, ..., ‖g_n‖)‖₂, coef = min(1, max / (total + 1e-6)).
  let clip: TensorId | undefined;
  if (train.clipGradNorm !== undefined && trained.length > 0) {
    const sumSquares = full("sum_squares", {});
    const sums = trained.map((p, i) => op("sum_squares", [grads[i]!], sumSquares, [SCALAR], p)[0]!);
    // A tensor-parallel rank holds slices of its split parameters' gradients: their sums of squares are
    // added up and all-reduced over the group once (every rank holds the replicated ones whole).
    const whole = sums.filter((_, i) => trained[i]!.split === undefined);
    const split = sums.filter((_, i) => trained[i]!.split !== undefined);
    if (split.length > 0) {
      const parts = trained.find((p) => p.split !== undefined)!.split!.parts;
      const local = split.slice(1).reduce((acc, s) => op("add", [acc, s], {}, [SCALAR], global)[0]!, split[0]!);
      whole.push(op("tp_all_reduce", [local], { parts }, [SCALAR], global)[0]!);
    }
    const norm = op("global_norm", whole, { n: whole.length }, [SCALAR], global)[0]!;
    clip = op("clip_coef", [norm], { max_norm: train.clipGradNorm }, [SCALAR], global)[0]!;
  }
  const clipOperand = clip === undefined ? [] : [clip];
  const hasClip = clip !== undefined;

  const opt = train.optimizer;
  if (opt.kind === "sgd") {
    const attrs = full("sgd_update", { lr: opt.lr, momentum: opt.momentum, weight_decay: opt.weightDecay, nesterov: opt.nesterov, clip: hasClip });
    trained.forEach((p, i) => {
      const buf = opt.momentum !== 0 ? [state(g, p, "momentum", "momentum_buffer")] : [];
      const outs = op("sgd_update", [p.tensor, grads[i]!, ...buf, ...clipOperand], attrs, [p.type, ...buf.map(() => p.type)], p, true);
      g.setUpdate(p.tensor, outs[0]!);
      if (buf.length > 0) g.setUpdate(buf[0]!, outs[1]!);
    });
    return;
  }
  // Adam and AdamW: one step counter for all parameters, incremented before the updates read it (t ≥ 1).
  const step = g.addState({ name: "optimizer.step", type: SCALAR, role: "step" });
  const t = op("step_increment", [step], {}, [SCALAR], global, true)[0]!;
  g.setUpdate(step, t);
  const attrs = full("adam_update", {
    lr: opt.lr,
    beta1: opt.betas[0],
    beta2: opt.betas[1],
    eps: opt.eps,
    weight_decay: opt.weightDecay,
    decoupled: opt.kind === "adamw",
    clip: hasClip,
  });
  trained.forEach((p, i) => {
    const m = state(g, p, "exp_avg", "exp_avg");
    const v = state(g, p, "exp_avg_sq", "exp_avg_sq");
    const outs = op("adam_update", [p.tensor, grads[i]!, m, v, t, ...clipOperand], attrs, [p.type, p.type, p.type], p, true);
    g.setUpdate(p.tensor, outs[0]!);
    g.setUpdate(m, outs[1]!);
    g.setUpdate(v, outs[2]!);
  });
}

/** A zero-initialized state tensor shaped like parameter p, named `<param>.<suffix>` (checkpoint names). */
function state(g: Graph, p: ParamInfo, role: "momentum" | "exp_avg" | "exp_avg_sq", suffix: string): TensorId {
  return g.addState({ name: `${p.name}.${suffix}`, type: p.type, role, param: p.name });
}
