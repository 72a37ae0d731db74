// A device kind's kernels held to a reference on one real training step: the graph runs op by op with the
// interpreter's kernels (f32, double inside), and every op the device kind has a kernel for gets the same
// operands and must give the same outputs within tolerance. Tests run it for the cpu and simt kinds; the GPU
// check (bench/gpu) runs it on a real GPU, also with 16-bit operands (each float operand rounded to bf16 as
// the device reads it, the reference computing on the rounded values), as mixed precision feeds the kernels.
import type { Graph, TensorId } from "../graph/graph.js";
import { numel } from "../graph/dim.js";
import { isFloatDType } from "../graph/types.js";
import { syntheticData } from "../data/synthetic.js";
import { initParams } from "../interp/init.js";
import { kernelFor } from "../interp/kernels/index.js";
import { bindDims, concreteShape } from "../interp/run.js";
import { floatArray, type Tensor } from "../interp/tensor.js";
import { runNativeKernel, type NativeData, type NativeKernelDevice, type NativeOperand } from "./binding.js";
import { concreteAttrs, hasNativeKernel, nativeKernel } from "./kernels.js";

export interface KernelMismatch {
  readonly op: string;
  readonly id: number;
  readonly output: number;
  /** The worst element's error over its tolerance (> 1: out of tolerance; NaN: a NaN where none belongs). */
  readonly worst: number;
}

export interface KernelParity {
  /** Every op of the step. */
  readonly seen: ReadonlySet<string>;
  /** Op instances compared. */
  readonly compared: number;
  readonly mismatches: readonly KernelMismatch[];
  /** Per op: the worst error over tolerance of any of its instances (≤ 1 passes). */
  readonly worstByOp: ReadonlyMap<string, number>;
}

export interface KernelParityOptions {
  readonly batch: number;
  readonly seq?: number;
  readonly device: NativeKernelDevice;
  /** f32 operands (default), or bf16: float operands rounded to bf16 and passed as such, float outputs bf16
   *  except parameter gradients and the loss (f32, as lowering keeps them), optimizer ops in f32. */
  readonly operands?: "f32" | "bf16";
  /** Tolerance: |got − want| ≤ atol + rtol·|want| (f32 defaults 1e-4 and 1e-5; bf16 defaults 1e-2 and 5e-2
   *  of the output's root mean square: bf16 keeps 8 bits, and a kernel that rounds its intermediates to bf16
   *  as tensor cores take them — attention's probabilities and output gradient — spreads errors of a few
   *  percent of the RMS over elements near zero). */
  readonly rtol?: number;
  readonly atol?: number;
  /** What drives the step and is compared against: the interpreter (default: exact, slow on large models) or
   *  the CPU's native kernels (f32 sgemm: the reference for models of real sizes). */
  readonly reference?: "interpreter" | "cpu";
}

/** f32 values rounded to bf16 bits, and back, by the CPU's cast kernel (the one conversion every device shares). */
function toBf16Bits(x: Float32Array): Uint16Array {
  return runNativeKernel("fsm_cast", [{ data: x, shape: [x.length] }], {}, [{ shape: [x.length], dtype: "bf16" }])[0] as Uint16Array;
}
function fromBf16Bits(x: Uint16Array): Float32Array {
  return runNativeKernel("fsm_cast", [{ data: x, shape: [x.length], dtype: "bf16" }], {}, [{ shape: [x.length], dtype: "f32" }])[0] as Float32Array;
}

/** Ops that run on fp32 master weights and state whatever the step's precision. */
const F32_OPS = new Set(["sum_squares", "global_norm", "clip_coef", "step_increment", "sgd_update", "adam_update"]);

function rms(a: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * a[i]!;
  return Math.sqrt(s / Math.max(1, a.length));
}

export function compareKernels(g: Graph, options: KernelParityOptions): KernelParity {
  const { batch, seq, device } = options;
  const bf16 = options.operands === "bf16";
  const rtol = options.rtol ?? (bf16 ? 1e-2 : 1e-4);
  const data = syntheticData(g, { batch, ...(seq !== undefined && { seq }), seed: 5 });
  const values = new Map<TensorId, Tensor>();
  const b = data.batch(0);
  for (const t of g.inputs()) values.set(t, b[g.tensor(t).name]!);
  const params = initParams(g, 3, "f32");
  for (const p of g.params()) values.set(p.tensor, params.get(p.name)!);
  for (const s of g.states()) values.set(s.tensor, { shape: s.type.shape.map((d) => numel([d])), data: floatArray("f32", numel(s.type.shape)) });
  const bindings = bindDims(g, b);
  const keepF32 = new Set<TensorId>([...g.paramGrads().values(), ...(g.loss !== undefined ? [g.loss] : [])]);
  const seen = new Set<string>();
  const mismatches: KernelMismatch[] = [];
  const worstByOp = new Map<string, number>();
  let compared = 0;
  for (const o of g.ops()) {
    seen.add(o.op);
    const half = bf16 && !F32_OPS.has(o.op);
    // In bf16 mode the reference computes on exactly the values the device reads.
    const inputs = o.inputs.map((t) => {
      const v = values.get(t)!;
      return half && v.data instanceof Float32Array ? { shape: v.shape, data: fromBf16Bits(toBf16Bits(v.data)) } : v;
    });
    const outShapes = o.outputs.map((t) => concreteShape(g.tensor(t).type.shape, bindings));
    const outInt = o.outputs.map((t) => !isFloatDType(g.tensor(t).type.dtype));
    const ctx = { outShapes, outInt, float: "f32" as const };
    const want = options.reference === "cpu" ? nativeKernel(o.op, "cpu")(inputs, o.attrs, ctx) : kernelFor(o.op)(inputs, o.attrs, ctx);
    if (hasNativeKernel(o.op, device)) {
      const operands: NativeOperand[] = inputs.map((t) =>
        half && t.data instanceof Float32Array ? { data: toBf16Bits(t.data), shape: t.shape, dtype: "bf16" } : { data: t.data as Float32Array | Int32Array, shape: t.shape },
      );
      const outDtype = (i: number): "f32" | "i32" | "bf16" => (outInt[i] ? "i32" : half && !keepF32.has(o.outputs[i]!) ? "bf16" : "f32");
      const got = runNativeKernel(o.op, operands, concreteAttrs(o.attrs), outShapes.map((shape, i) => ({ shape, dtype: outDtype(i) })), { device });
      compared++;
      want.forEach((w, i) => {
        const a = w.data;
        const raw: NativeData = got[i]!;
        const n = outDtype(i) === "bf16" ? fromBf16Bits(raw as Uint16Array) : raw;
        const atol = options.atol ?? (bf16 ? 5e-2 * rms(a) : 1e-5);
        let worst = n.length === a.length ? 0 : Number.POSITIVE_INFINITY;
        for (let k = 0; k < a.length && k < n.length; k++) {
          const e = Math.abs(a[k]! - n[k]!) / (atol + rtol * Math.abs(a[k]!));
          // NaN where the reference has none is the worst there is (and where it has one, NaN must match).
          if (Number.isNaN(e)) {
            if (!(Number.isNaN(a[k]!) && Number.isNaN(n[k]!))) worst = Number.NaN;
          } else if (!Number.isNaN(worst)) worst = Math.max(worst, e);
        }
        worstByOp.set(o.op, Number.isNaN(worst) || Number.isNaN(worstByOp.get(o.op) ?? 0) ? Number.NaN : Math.max(worstByOp.get(o.op) ?? 0, worst));
        if (!(worst <= 1)) mismatches.push({ op: o.op, id: o.id, output: i, worst });
      });
    }
    o.outputs.forEach((t, i) => values.set(t, want[i]!));
  }
  return { seen, compared, mismatches, worstByOp };
}
