// The autodiff pass: forward graph + train settings → training graph (forward, backward, weight_grad and
// optimizer phases in one op list). Gradients come from each op's `backward` rule in the registry.
import type { TrainConfig } from "../check/settings-types.js";
import type { BackwardEmitter } from "../graph/backward-rule.js";
import { shapeEq } from "../graph/dim.js";
import type { Graph, OpNode, Phase, TensorId } from "../graph/graph.js";
import { inferOutputs } from "../graph/op-def.js";
import { getOp, withDefaults } from "../graph/registry.js";
import type { Attrs } from "../graph/types.js";
import { typeToString } from "../graph/types-format.js";
import { gradientNeeded } from "../graph/gradient-needed.js";
import { emitOptimizerStep } from "./optimizer-step.js";
import type { Pass } from "./pass.js";

// The memory model reads what the backward keeps from the pass that creates it.
export { savedByLayer, savedForBackward, savedTensors, type LayerSaved } from "./saved-for-backward.js";

function internal(message: string): never {
  throw new Error(`internal: ${message}`);
}

export const autodiff: Pass = {
  name: "autodiff",
  summary: "Derives the backward pass (input and weight gradients apart) and the optimizer step from the forward graph.",
  run(g, ctx) {
    if (!ctx.train) throw new Error("autodiff needs the model's train settings (a train section) to build the optimizer step");
    return buildTrainingGraph(g, ctx.train);
  },
};

/** The training graph of a forward graph: a new graph, the input is left untouched. */
export function buildTrainingGraph(forward: Graph, train: TrainConfig): Graph {
  if (forward.isTraining()) internal(`graph '${forward.model}' is already a training graph`);
  const g = forward.clone();
  deriveGradients(g);
  emitOptimizerStep(g, train);
  return g;
}

/**
 * Appends the backward and weight_grad ops: seeds d(loss)/d(loss) = 1, walks the forward ops in reverse
 * topological order asking each op's rule for its operands' gradients, sums the gradients of a tensor or
 * parameter used more than once as they arrive, and records each parameter's gradient.
 */
function deriveGradients(g: Graph): void {
  const loss = g.loss ?? internal(`graph '${g.model}' has no loss`);
  const forwardOps = g.topoOrder().map((id) => g.op(id));
  const need = gradientNeeded(g, forwardOps, loss);
  const lossOp = g.tensor(loss).producer;
  if (lossOp === undefined || !need[loss]) throw new Error(`the loss of '${g.model}' does not depend on any parameter: nothing to train`);

  const fwd = g.op(lossOp);
  const seed = g.addOp({
    op: "fill",
    attrs: withDefaults(getOp("fill")!.attrs, { value: 1 }),
    inputs: [],
    outputTypes: [{ dtype: "f32", shape: [] }],
    scope: fwd.scope,
    layer: fwd.layer,
    phase: "backward",
    forwardOp: fwd.id,
  })[0]!;
  const grad = new Map<TensorId, TensorId>([[loss, seed]]);
  const again = regathering(g);

  for (let i = forwardOps.length - 1; i >= 0; i--) {
    const o = forwardOps[i]!;
    if (!o.outputs.some((t) => need[t])) continue;
    if (o.outputs.length !== 1) internal(`autodiff expects single-output forward ops, ${o.op} has ${o.outputs.length}`);
    // A needed output with no gradient lies only on paths whose rules give none: its gradient is zero.
    const dy = grad.get(o.outputs[0]!);
    if (dy === undefined) continue;
    const def = getOp(o.op) ?? internal(`unknown op '${o.op}'`);
    if (!def.backward) throw new Error(`not implemented: backward of op '${o.op}'`);
    const wants = o.inputs.map((t) => need[t] === 1);
    const grads = def.backward({ inputs: o.inputs.map((t) => again(t, o)), output: o.outputs[0]!, dy, attrs: withDefaults(def.attrs, o.attrs), wants }, emitterFor(g, o));
    o.inputs.forEach((t, slot) => {
      const dt = grads[slot];
      if (wants[slot] && dt !== undefined) accumulate(g, grad, t, dt, o);
    });
  }

  for (const p of g.params()) {
    const t = grad.get(p.tensor);
    if (t !== undefined) g.setParamGrad(p.name, t);
  }
}

/**
 * What a backward reads of a forward value: the value itself, except a sequence-parallel all-gather's whole
 * sequence (tp_seq_gather), which is gathered again from the ranks' parts at its first backward use and
 * not kept from the forward, as Megatron-LM does: a rank then stores 1/t of a region's input (its part) and
 * the backward pays a second all-gather (tp_seq_gather's cost counts it).
 */
function regathering(g: Graph): (t: TensorId, reader: OpNode) => TensorId {
  const regathered = new Map<TensorId, TensorId>();
  return (t, reader) => {
    const producer = g.tensor(t).producer;
    const gather = producer === undefined ? undefined : g.op(producer);
    if (gather?.op !== "tp_seq_gather" || gather.phase !== "forward") return t;
    let again = regathered.get(t);
    if (again === undefined) {
      again = g.addOp({ op: "tp_seq_gather", attrs: gather.attrs, inputs: gather.inputs, outputTypes: [g.tensor(t).type], scope: reader.scope, layer: reader.layer, phase: "backward", forwardOp: reader.id })[0]!;
      regathered.set(t, again);
    }
    return again;
  };
}

/**
 * Adds a gradient contribution to tensor t. The second and later contributions are summed at once by an
 * add op in the context of the op that produced the contribution (a residual branch, the second use of a
 * tied weight), so every tensor's gradient is complete when its producer's turn comes.
 */
function accumulate(g: Graph, grad: Map<TensorId, TensorId>, t: TensorId, dt: TensorId, by: OpNode): void {
  const want = g.tensor(t).type;
  const got = g.tensor(dt).type;
  if (want.dtype !== got.dtype || !shapeEq(want.shape, got.shape)) {
    internal(`backward of ${by.op} (op ${by.id}) gives a ${typeToString(got)} gradient for ${typeToString(want)} operand %${t}`);
  }
  const prev = grad.get(t);
  if (prev === undefined) {
    grad.set(t, dt);
    return;
  }
  const phase: Phase = g.tensor(t).kind === "param" ? "weight_grad" : "backward";
  const [sum] = g.addOp({ op: "add", attrs: {}, inputs: [prev, dt], outputTypes: [want], scope: by.scope, layer: by.layer, phase, forwardOp: by.id });
  grad.set(t, sum!);
}

/** The emitter a rule of forward op `o` writes through: ops in o's scope and layer, linked to o. */
function emitterFor(g: Graph, o: OpNode): BackwardEmitter {
  const emit = (phase: Phase, op: string, inputs: readonly TensorId[], attrs: Attrs = {}): TensorId[] => {
    const def = getOp(op) ?? internal(`backward of ${o.op} emits unknown op '${op}'`);
    const full = withDefaults(def.attrs, attrs);
    const bad = def.validate?.(full);
    if (bad) internal(`backward of ${o.op} (op ${o.id}) gives ${op} bad attributes: ${bad.message}`);
    const types = inferOutputs(def, inputs.map((t) => g.tensor(t).type), full);
    if (!Array.isArray(types)) internal(`backward of ${o.op} (op ${o.id}): ${op} rejects its operands: ${(types as { message: string }).message}`);
    return g.addOp({ op, attrs: full, inputs, outputTypes: types, scope: o.scope, layer: o.layer, phase, forwardOp: o.id });
  };
  return {
    type: (t) => g.tensor(t).type,
    isParam: (t) => g.tensor(t).kind === "param",
    input: (op, inputs, attrs) => emit("backward", op, inputs, attrs)[0]!,
    inputMany: (op, inputs, attrs) => emit("backward", op, inputs, attrs),
    weight: (op, inputs, attrs) => emit("weight_grad", op, inputs, attrs)[0]!,
  };
}
