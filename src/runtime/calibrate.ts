// `fsm calibrate`: this machine's op times for a plan's shapes, in the calibration file format of
// src/cost/calibration.ts, so the cpu profile's predictions use measurements instead of roofline estimates.
// For every micro-batch size the plan search may pick (each divisor of the batch), one micro-batch runs op by
// op on the native kernels with realistic operands (the synthetic data, the initial weights); each op is
// timed `repeats` times after a warm-up and its median kept. A forward op's backward time is the sum of the
// input- and weight-gradient ops derived from it; instances of the same op and shape (repeated layers) share
// one entry, their median.
import { cpus } from "node:os";
import { shapeKey, CALIBRATION_FORMAT, CALIBRATION_VERSION } from "../cost/calibration.js";
import { onDevice } from "../cost/precision.js";
import { numel } from "../graph/dim.js";
import type { TensorId } from "../graph/graph.js";
import type { Precision } from "../check/settings-types.js";
import { syntheticData } from "../data/synthetic.js";
import { initParams } from "../interp/init.js";
import { concreteShape } from "../interp/run.js";
import { floatArray, type Tensor } from "../interp/tensor.js";
import { isFloatDType } from "../graph/types.js";
import { nativeBuildInfo, timeNativeKernel } from "../native/binding.js";
import { concreteAttrs as nativeAttrs, hasNativeKernel, nativeKernel } from "../native/kernels.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import type { Plan } from "../plan/plan.js";
import { sliceBatch } from "./reference-step.js";

export interface CalibrationFile {
  readonly format: typeof CALIBRATION_FORMAT;
  readonly version: typeof CALIBRATION_VERSION;
  readonly profile: string;
  readonly machine: string;
  readonly date: string;
  readonly ops: { op: string; shape: string; forwardSeconds: number; backwardSeconds: number }[];
}

export class CalibrateError extends Error {}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export function calibratePlan(plan: Plan, repeats = 5): CalibrationFile {
  if (plan.cluster.profile !== "cpu") {
    throw new CalibrateError(`calibrate measures this machine's CPU: compile the plan with --cluster cpu (it is for ${plan.cluster.profile})`);
  }
  if (plan.settings.precision !== "fp32") throw new CalibrateError(`calibrate runs fp32 kernels; the plan's precision is ${plan.settings.precision}`);
  if (!(Number.isInteger(repeats) && repeats >= 1)) throw new CalibrateError(`repeats must be a positive integer, got ${repeats}`);
  // Its ops are timed one device at a time; a tensor-parallel rank's collectives need its whole group.
  if (plan.settings.tensorParallel > 1) throw new CalibrateError(`not implemented: calibrating a tensor-parallel plan (tensor_parallel = ${plan.settings.tensorParallel}); calibrate the model's plan with tensor_parallel = 1, whose kernels the tensor-parallel ranks run on slices`);
  const g = graphFromJson(plan.model.name, plan.graph);
  const missing = [...new Set(g.ops().map((o) => o.op))].filter((op) => !hasNativeKernel(op));
  if (missing.length > 0) throw new CalibrateError(`no native kernel yet for ${missing.join(", ")}`);
  const seq = plan.settings.seq;
  const seed = plan.run?.seed ?? 0;
  const full = syntheticData(g, { batch: plan.settings.batch, ...(seq !== null && { seq }), seed }).batch(0);
  const params = initParams(g, seed, "f32");
  const byKey = new Map<string, { op: string; shape: string; f: number[]; b: number[] }>();
  for (let mbs = 1; mbs <= plan.settings.batch; mbs++) {
    if (plan.settings.batch % mbs !== 0) continue;
    const bindings = seq === null ? { B: mbs } : { B: mbs, S: seq };
    const batch = sliceBatch(full, 0, mbs);
    const values = new Map<TensorId, Tensor>();
    for (const t of g.inputs()) values.set(t, batch[g.tensor(t).name]!);
    for (const p of g.params()) values.set(p.tensor, params.get(p.name)!);
    for (const s of g.states()) values.set(s.tensor, { shape: s.type.shape.map((d) => numel([d])), data: floatArray("f32", numel(s.type.shape)) });
    const seconds = new Map<number, number>();
    for (const o of g.ops()) {
      if (o.phase === "optimizer") continue; // the cost model prices the optimizer step by memory traffic
      const inputs = o.inputs.map((t) => values.get(t)!);
      const ctx = { outShapes: o.outputs.map((t) => concreteShape(g.tensor(t).type.shape, bindings)), outInt: o.outputs.map((t) => !isFloatDType(g.tensor(t).type.dtype)), float: "f32" as const };
      const outs = nativeKernel(o.op)(inputs, o.attrs, ctx);
      // Timed in native code: what a step program pays per instruction, without the JS call overhead.
      const operands = inputs.map((t) => ({ data: t.data as Float32Array | Int32Array, shape: t.shape }));
      const outputs = ctx.outShapes.map((shape, i) => ({ shape, dtype: ctx.outInt[i] ? ("i32" as const) : ("f32" as const) }));
      seconds.set(o.id, timeNativeKernel(o.op, operands, nativeAttrs(o.attrs), outputs, repeats));
      o.outputs.forEach((t, i) => values.set(t, outs[i]!));
    }
    const backward = new Map<number, number>();
    for (const o of g.ops()) {
      if ((o.phase === "backward" || o.phase === "weight_grad") && o.forwardOp !== undefined) backward.set(o.forwardOp, (backward.get(o.forwardOp) ?? 0) + seconds.get(o.id)!);
    }
    for (const o of g.ops()) {
      if (o.phase !== "forward") continue;
      const shape = shapeKey(o.inputs.map((t) => onDevice(g.tensor(t).type, plan.settings.precision as Precision)), o.attrs, bindings);
      const key = `${o.op}\0${shape}`;
      if (!byKey.has(key)) byKey.set(key, { op: o.op, shape, f: [], b: [] });
      byKey.get(key)!.f.push(seconds.get(o.id)!);
      byKey.get(key)!.b.push(backward.get(o.id) ?? 0);
    }
  }
  const cpu = cpus();
  return {
    format: CALIBRATION_FORMAT,
    version: CALIBRATION_VERSION,
    profile: "cpu",
    machine: `${cpu[0]?.model.trim() ?? "unknown CPU"}, ${cpu.length} CPUs, ${nativeBuildInfo().blas} BLAS`,
    date: new Date().toISOString(),
    ops: [...byKey.values()].map((e) => ({ op: e.op, shape: e.shape, forwardSeconds: median(e.f), backwardSeconds: median(e.b) })),
  };
}
