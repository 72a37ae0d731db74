// A plan's training step lowered to a flat program for the native engine: every value the reference
// executor (reference-step.ts) would hold gets a slot in one arena (slot-layout.ts reuses bytes between
// values that are never live together), and every op it would
// run becomes an instruction on slots, in the same order; gradients are averaged over micro-batches and
// replicas (fsm_accumulate) and updates copied into the parameters' and state's own slots (fsm_copy). The
// native side then runs a whole step with no allocation and no graph logic. fsm_add_inplace is the one
// instruction whose output is also an input (the runner does not zero it first).
import type { Graph, TensorId } from "../graph/graph.js";
import { isFloatDType } from "../graph/types.js";
import type { Attrs } from "../graph/types.js";
import { concreteShape } from "../interp/run.js";
import type { NativeAttrs } from "../native/binding.js";
import { concreteAttrs } from "../native/kernels.js";
import type { Plan } from "../plan/plan.js";
import { computeSteps } from "./stage-ops.js";
import { layoutSlots } from "./slot-layout.js";

export interface Slot {
  readonly shape: readonly number[];
  readonly dtype: "f32" | "i32";
  /** Bytes from the start of the arena (64-byte aligned; slots whose lifetimes do not overlap share bytes). */
  readonly offset: number;
}

export interface Instruction {
  readonly op: string;
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly attrs: NativeAttrs;
  /** For traces: the device (global rank) and plan action it belongs to; rank null for the step's tail
   *  (gradient averaging, optimizer, updates), which this program runs once for every device. */
  readonly tag: { readonly rank: number | null; readonly action: string };
}

export interface StepProgram {
  readonly slots: readonly Slot[];
  readonly instructions: readonly Instruction[];
  readonly arenaBytes: number;
  /** Per replica, per micro-batch: the slot of each model input, by name. */
  readonly inputSlots: readonly (readonly Readonly<Record<string, number>>[])[];
  readonly paramSlots: ReadonlyMap<string, number>;
  readonly stateSlots: ReadonlyMap<string, number>;
  /** The loss of every (replica, micro-batch), replica-major. */
  readonly lossSlots: readonly number[];
}

const TAIL = { rank: null, action: "OPTIMIZER" } as const;

export function lowerStep(plan: Plan, g: Graph): StepProgram {
  const { dataParallel: dp, microBatches: m, microBatchSize: mbs } = plan.settings;
  const bindings = plan.settings.seq === null ? { B: mbs } : { B: mbs, S: plan.settings.seq };
  const made: { shape: number[]; dtype: "f32" | "i32" }[] = [];
  const slotFor = (t: TensorId): number => {
    const info = g.tensor(t);
    made.push({ shape: concreteShape(info.type.shape, bindings), dtype: isFloatDType(info.type.dtype) ? "f32" : "i32" });
    return made.length - 1;
  };
  const paramSlots = new Map(g.params().map((p) => [p.name, slotFor(p.tensor)] as const));
  const stateSlots = new Map(g.states().map((s) => [s.name, slotFor(s.tensor)] as const));
  const shared = new Map<TensorId, number>();
  for (const p of g.params()) shared.set(p.tensor, paramSlots.get(p.name)!);
  for (const s of g.states()) shared.set(s.tensor, stateSlots.get(s.name)!);

  // One slot table per (replica, micro-batch), as the reference executor's value maps.
  const values: Map<TensorId, number>[][] = [];
  const inputSlots: Record<string, number>[][] = [];
  for (let r = 0; r < dp; r++) {
    values.push([]);
    inputSlots.push([]);
    for (let j = 0; j < m; j++) {
      const v = new Map(shared);
      const named: Record<string, number> = {};
      for (const t of g.inputs()) {
        const s = slotFor(t);
        v.set(t, s);
        named[g.tensor(t).name] = s;
      }
      values[r]!.push(v);
      inputSlots[r]!.push(named);
    }
  }
  const instructions: Instruction[] = [];
  const emit = (ops: readonly { inputs: readonly TensorId[]; outputs: readonly TensorId[]; op: string; attrs: Attrs; id: number }[], v: Map<TensorId, number>, tag: Instruction["tag"]): void => {
    for (const o of ops) {
      const inputs = o.inputs.map((t) => {
        const s = v.get(t);
        if (s === undefined) throw new Error(`internal: op ${o.id} (${o.op}) reads %${t} before it is computed`);
        return s;
      });
      const outputs = o.outputs.map((t) => {
        const s = slotFor(t);
        v.set(t, s);
        return s;
      });
      instructions.push({ op: o.op, inputs, outputs, attrs: concreteAttrs(o.attrs), tag });
    }
  };

  // Each replica sums its parameter gradients over micro-batches as they finish (the first copied into an
  // accumulator, the rest added in place), so a micro-batch's gradients die as soon as they are added.
  const gradTensors = new Set([...g.paramGrads().values()]);
  const acc: Map<TensorId, number>[] = Array.from({ length: dp }, () => new Map());
  for (const { text, stage, mb, ops: list } of computeSteps(g, plan)) {
    for (let r = 0; r < dp; r++) {
      const tag = { rank: plan.stages[stage]!.ranks[r]!, action: text };
      const v = values[r]![mb]!;
      emit(list, v, tag);
      for (const o of list) {
        for (const t of o.outputs) {
          if (!gradTensors.has(t)) continue;
          const into = acc[r]!.get(t);
          if (into === undefined) {
            const slot = slotFor(t);
            acc[r]!.set(t, slot);
            instructions.push({ op: "fsm_copy", inputs: [v.get(t)!], outputs: [slot], attrs: {}, tag });
          } else {
            instructions.push({ op: "fsm_add_inplace", inputs: [into, v.get(t)!], outputs: [into], attrs: {}, tag });
          }
        }
      }
    }
  }

  // Gradients: Σ over replicas of their accumulators, × 1/(dp·m).
  const scale = 1 / (dp * m);
  const opt = new Map(shared);
  for (const t of gradTensors) {
    const out = slotFor(t);
    instructions.push({ op: "fsm_accumulate", inputs: acc.map((a) => a.get(t)!), outputs: [out], attrs: { scale }, tag: TAIL });
    opt.set(t, out);
  }
  emit(g.ops().filter((o) => o.phase === "optimizer"), opt, TAIL);
  for (const [target, value] of g.updates()) instructions.push({ op: "fsm_copy", inputs: [opt.get(value)!], outputs: [shared.get(target)!], attrs: {}, tag: TAIL });
  const lossSlots = values.flatMap((row) => row.map((v) => v.get(g.loss!)!));

  // Lifetimes for the layout: pinned slots are touched from outside a run; the rest live from their write
  // to their last read.
  const pinned = new Set<number>([...paramSlots.values(), ...stateSlots.values(), ...lossSlots, ...inputSlots.flatMap((row) => row.flatMap((x) => Object.values(x)))]);
  const from = made.map(() => Infinity);
  const to = made.map(() => -1);
  instructions.forEach((ins, i) => {
    for (const s of ins.outputs) {
      from[s] = Math.min(from[s]!, i);
      to[s] = Math.max(to[s]!, i);
    }
    for (const s of ins.inputs) to[s] = Math.max(to[s]!, i);
  });
  const layout = layoutSlots(
    made.map((m, s) => ({
      bytes: 4 * m.shape.reduce((a, b) => a * b, 1),
      from: pinned.has(s) ? -1 : from[s]!,
      to: pinned.has(s) ? Infinity : Math.max(to[s]!, from[s]!),
    })),
  );
  const slots: Slot[] = made.map((m, s) => ({ ...m, offset: layout.offsets[s]! }));
  return { slots, instructions, arenaBytes: layout.arenaBytes, inputSlots, paramSlots, stateSlots, lossSlots };
}
