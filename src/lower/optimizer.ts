// The optimizer phase of one device in the cluster lowering (cluster-program.ts): each device steps only
// what it owns — every parameter (none), the parameters it owns (oss, sddp) or its shard of each FSDP unit
// as one flat tensor (the update ops are elementwise) — with optimizer state of that size. Gradients are
// first averaged (× 1/(dp·m)); for clipping, each device sums the squares of the gradient elements it
// counts (every element once across all devices: replica 0 for replicated ones, the owner or the shard
// for sharded ones, the first holder stage for tied ones), one all-reduce over every device gives the
// global sum, and the graph's own global_norm / clip_coef / update ops run on it, the updates in place.
import type { Graph, OpNode, TensorId } from "../graph/graph.js";
import { concreteShape } from "../interp/run.js";
import { concreteAttrs } from "../native/kernels.js";
import type { Plan } from "../plan/plan.js";
import { COMM, COMPUTE, type DeviceBuilder, type Stream } from "./device-program.js";

/** What one device steps: a parameter, or an FSDP unit's shard. */
export interface UpdateItem {
  readonly stage: number;
  /** The graph parameters it covers (an FSDP unit: all its members). */
  readonly params: readonly string[];
  /** The slot stepped: the full parameter or the rank's shard (fp32; the master weights under mixed
   *  precision). */
  readonly param: number;
  /** Mixed precision: the 16-bit copy compute reads, refreshed from `param` after each update. */
  readonly copy?: number;
  readonly shape: readonly number[];
  /** Slot of its summed gradient once known (fsdp: the shard accumulator), else -1. */
  grad: number;
  readonly key: string;
  /** Element ranges of the gradient this device counts in the global norm. */
  readonly norm: readonly { readonly at: number; readonly count: number }[];
}

export interface OptimizerLowering {
  /** The gradient-norm all-reduce action: average, sum squares of what this device counts, all-reduce. */
  gradNorm(text: string): void;
  /** The OPTIMIZER action of stage k. */
  optimizer(k: number, text: string): void;
  /** What persists between steps besides the weights: each item's optimizer state slot by role, and the
   *  step counter's slot (for checkpoints). */
  readonly state: { readonly items: readonly { readonly item: UpdateItem; readonly role: string; readonly slot: number }[]; readonly step?: number };
}

export function lowerOptimizer(
  b: DeviceBuilder,
  g: Graph,
  plan: Plan,
  items: ReadonlyMap<number, UpdateItem[]>,
  grads: {
    /** The summed gradient an item steps with. */
    readonly gradSlot: (item: UpdateItem) => number;
    /** Every gradient sum of the device, when it holds them all (one stage, replicated gradients). */
    readonly everyGradient: () => number[];
    /** fp16 loss scaling: gradients are divided by S (the `inverse` slot holds 1/S) and the update is
     *  skipped on every device when any gradient is not finite (`overflow`, all-reduced over every device). */
    readonly scaling?: { readonly inverse: number; readonly overflow: number };
  },
): OptimizerLowering {
  const { gradSlot, scaling } = grads;
  const guard = scaling ? { guard: scaling.overflow } : {};
  const { dataParallel: dp, microBatches: m } = plan.settings;
  const scale = 1 / (dp * m);
  const ops = g.ops().filter((o) => o.phase === "optimizer");
  const updateOf = new Map<string, OpNode>();
  for (const o of ops) {
    const t = g.tensor(o.inputs[0]!);
    if (t.kind === "param") updateOf.set(t.name, o);
  }
  const targetOf = new Map<TensorId, TensorId>();
  for (const [target, value] of g.updates()) targetOf.set(value, target);
  const world = Array.from({ length: plan.cluster.devices }, (_, i) => i);
  const stepState = g.states().find((s) => s.role === "step");
  // Each parameter's optimizer state, found once (a deep model has thousands of parameters and states).
  const statesOf = new Map<string, ReturnType<Graph["states"]>[number][]>();
  for (const s of g.states()) {
    if (s.param === undefined) continue;
    const list = statesOf.get(s.param);
    if (list) list.push(s);
    else statesOf.set(s.param, [s]);
  }
  const states = (param: string) => statesOf.get(param) ?? [];
  const stepSlot = stepState ? b.pin(b.slot(concreteShape(stepState.type.shape, {}))) : undefined;
  // Optimizer state of the size of what is stepped, zero at the start (the arena starts zeroed).
  const stateSlots = new Map<string, number>();
  for (const list of items.values()) {
    for (const item of list) for (const s of states(item.params[0]!)) stateSlots.set(`${item.key}:${s.role}`, b.pin(b.slot(item.shape)));
  }
  const scaled = new Map<string, number>();
  let total: number | undefined;
  let shared: Map<TensorId, number> | undefined;

  const scaleSlot = (grad: number, stream: Stream, text: string): void => {
    if (scaling) b.emit(stream, "fsm_scale_by", [grad, scaling.inverse], [grad], { scale }, text, { inPlace: true });
    // One replica of one micro-batch averages over nothing: x·1 is x, so no launch (mlp's 1-device step ran
    // 12 of its 60 instructions scaling by 1).
    else if (scale !== 1) b.emit(stream, "fsm_scale", [grad], [grad], { scale }, text, { inPlace: true });
  };

  // Averaging scales each summed gradient in place: no second copy of the gradients. Gradients lying end to
  // end in one buffer (a bucket's views) are scaled by one instruction over their run: the same multiply on
  // every element, a launch instead of one a parameter.
  const average = (list: readonly UpdateItem[], stream: Stream, text: string): void => {
    const grads: { slot: number; root: number; at: number; bytes: number }[] = [];
    for (const item of list) {
      if (scaled.has(item.key)) continue;
      const grad = gradSlot(item);
      scaled.set(item.key, grad);
      const where = b.placement(grad);
      if (b.dtype(grad) === "f32" && b.dtype(where.root) === "f32") grads.push({ slot: grad, ...where });
      else scaleSlot(grad, stream, text);
    }
    grads.sort((x, y) => x.root - y.root || x.at - y.at);
    for (let i = 0; i < grads.length; ) {
      let j = i + 1;
      let end = grads[i]!.at + grads[i]!.bytes;
      while (j < grads.length && grads[j]!.root === grads[i]!.root && grads[j]!.at === end) end += grads[j++]!.bytes;
      scaleSlot(j === i + 1 ? grads[i]!.slot : b.view(grads[i]!.root, grads[i]!.at / 4, [(end - grads[i]!.at) / 4]), stream, text);
      i = j;
    }
  };

  const template = (item: UpdateItem): OpNode => {
    const op = updateOf.get(item.params[0]!);
    if (!op) throw new Error(`internal: no optimizer update for '${item.params[0]}'`);
    for (const p of item.params.slice(1)) {
      const other = updateOf.get(p);
      if (!other || other.op !== op.op || JSON.stringify(other.attrs) !== JSON.stringify(op.attrs)) {
        throw new Error(`not implemented: parameters of one FSDP unit with different optimizer settings ('${item.params[0]}', '${p}')`);
      }
    }
    return op;
  };

  /** Averages every gradient this device steps and sums the squares of the elements it counts. */
  const localSquares = (stream: Stream, text: string): number => {
    const all = [...items.values()].flat();
    average(all, stream, text);
    const parts: number[] = [];
    for (const item of all) {
      for (const r of item.norm) {
        const grad = scaled.get(item.key)!;
        const view = r.at === 0 && r.count === item.shape.reduce((x, y) => x * y, 1) ? grad : b.view(grad, r.at, [r.count]);
        const s = b.slot([]);
        b.emit(stream, "sum_squares", [view], [s], {}, text);
        parts.push(s);
      }
    }
    const sum = b.slot([]);
    b.emit(stream, "fsm_accumulate", parts, [sum], { scale: 1 }, text);
    return sum;
  };

  const state = {
    items: [...items.values()].flat().flatMap((item) => states(item.params[0]!).map((x) => ({ item, role: x.role, slot: stateSlots.get(`${item.key}:${x.role}`)! }))),
    ...(stepSlot !== undefined && { step: stepSlot }),
  };

  return {
    state,
    gradNorm(text) {
      total = localSquares(COMM, text);
      b.emit(COMM, "comm.allReduce", [total], [total], { group: world }, text);
    },

    optimizer(k, text) {
      if (!shared) {
        // Once per device: the overflow verdict (fp16), the clip coefficient from the global sum and the
        // step counter.
        shared = new Map();
        if (scaling) {
          const all = [...items.values()].flat();
          b.emit(COMM, "fsm_nonfinite", all.map((item) => gradSlot(item)), [scaling.overflow], {}, text);
          b.emit(COMM, "comm.allReduce", [scaling.overflow], [scaling.overflow], { group: world }, text);
        }
        // Without a gradient-norm all-reduce (one stage whose replicas all hold every averaged gradient), the
        // device's own sum is the global one: Σ squares of the sums × (1/(dp·m))².
        if (total === undefined && ops.some((o) => o.op === "global_norm")) {
          const parts = grads.everyGradient().map((slot) => {
            const s = b.slot([]);
            b.emit(COMPUTE, "sum_squares", [slot], [s], {}, text);
            return s;
          });
          total = b.slot([]);
          b.emit(COMPUTE, "fsm_accumulate", parts, [total], { scale: scale * scale }, text);
          // fp16: the sums are of loss-scaled gradients; unscale the squares by (1/S)².
          if (scaling) for (let i = 0; i < 2; i++) b.emit(COMPUTE, "fsm_scale_by", [total, scaling.inverse], [total], {}, text, { inPlace: true });
        }
        // The graph's own sums of squares, and what it builds from them before global_norm (a tensor-parallel
        // graph adds its split parameters' sums and all-reduces them over the group), are what `total` holds.
        const squares = new Set<TensorId>();
        for (const o of ops) {
          if (o.op === "sum_squares" || (o.op !== "global_norm" && o.inputs.length > 0 && o.inputs.every((t) => squares.has(t)))) {
            for (const t of o.outputs) squares.add(t);
            continue;
          }
          if (updateOf.has(g.tensor(o.inputs[0]!).name)) continue;
          const inputs = o.op === "global_norm" ? [total ?? fail(`internal: ${text}: clipping without a gradient-norm all-reduce`)] : o.inputs.map((t) => (t === stepState?.tensor ? stepSlot! : shared!.get(t) ?? fail(`internal: ${text}: optimizer op ${o.op} reads %${t} first`)));
          const outputs = o.outputs.map((t) => b.slot(concreteShape(g.tensor(t).type.shape, {})));
          b.emit(COMPUTE, o.op, inputs, outputs, concreteAttrs(o.attrs), text);
          o.outputs.forEach((t, i) => {
            shared!.set(t, outputs[i]!);
            if (stepState && targetOf.get(t) === stepState.tensor) b.emit(COMPUTE, "fsm_copy", [outputs[i]!], [stepSlot!], {}, text, guard);
          });
        }
      }
      const list = items.get(k) ?? [];
      average(list, COMPUTE, text); // no-op for what the gradient-norm action already averaged
      for (const item of list) {
        const op = template(item);
        const name = item.params[0]!;
        const param = g.param(name)!;
        const grad = g.paramGrad(name);
        const roleOf = new Map(states(name).map((s) => [s.tensor, s.role] as const));
        const inputs = op.inputs.map((t) => {
          if (t === param.tensor) return item.param;
          if (t === grad) return scaled.get(item.key)!;
          const role = roleOf.get(t);
          if (role !== undefined) return stateSlots.get(`${item.key}:${role}`)!;
          return shared!.get(t) ?? fail(`internal: ${text}: update of '${name}' reads %${t}`);
        });
        // Elementwise updates written over the parameter and its state (each element read before written).
        const outputs = op.outputs.map((t) => {
          const target = targetOf.get(t);
          if (target === param.tensor) return item.param;
          if (target !== undefined && roleOf.has(target)) return stateSlots.get(`${item.key}:${roleOf.get(target)}`)!;
          return b.slot(item.shape);
        });
        b.emit(COMPUTE, op.op, inputs, outputs, concreteAttrs(op.attrs), text, { inPlace: true, ...guard });
        if (item.copy !== undefined) b.emit(COMPUTE, "fsm_cast", [item.param], [item.copy], {}, text, guard);
      }
    },
  };
}

function fail(message: string): never {
  throw new Error(message);
}
