// The native kernels behind the interpreter's Kernel contract (fp32): the reference executor can run with
// them, and the kernel parity tests compare them with the interpreter's on real graphs.
import type { Attrs } from "../graph/types.js";
import type { Kernel } from "../interp/kernels/kernel.js";
import type { Tensor } from "../interp/tensor.js";
import { nativeKernelNames, runNativeKernel, type NativeAttrs, type NativeKernelDevice } from "./binding.js";

/** Attributes a native kernel can read: numbers, booleans and strings (dims and parameter references are
 *  the graph's business, not a kernel's). */
export function concreteAttrs(attrs: Attrs): NativeAttrs {
  const out: Record<string, number | boolean | string> = {};
  for (const [k, v] of Object.entries(attrs)) if (typeof v === "number" || typeof v === "boolean" || typeof v === "string") out[k] = v;
  return out;
}

/** The native kernel of `op` on a device kind (default cpu) as a Kernel; throws "not implemented" for an op
 *  the kind lacks. */
export function nativeKernel(op: string, device: NativeKernelDevice = "cpu"): Kernel {
  return (inputs, attrs, ctx): Tensor[] => {
    if (ctx.float !== "f32") throw new Error(`native kernels run in f32, not ${ctx.float}`);
    const operands = inputs.map((t) => {
      if (!(t.data instanceof Float32Array || t.data instanceof Int32Array)) throw new Error(`native kernel ${op}: operands must be Float32Array or Int32Array`);
      return { data: t.data, shape: t.shape };
    });
    const outs = runNativeKernel(op, operands, concreteAttrs(attrs), ctx.outShapes.map((shape, i) => ({ shape, dtype: ctx.outInt?.[i] ? "i32" : "f32" })), { device });
    return outs.map((data, i) => ({ shape: [...ctx.outShapes[i]!], data }) as Tensor);
  };
}

const names = new Map<NativeKernelDevice, ReadonlySet<string>>();

/** Whether the addon has a kernel for `op` on a device kind (default cpu). */
export function hasNativeKernel(op: string, device: NativeKernelDevice = "cpu"): boolean {
  let set = names.get(device);
  if (!set) names.set(device, (set = new Set(nativeKernelNames(device))));
  return set.has(op);
}
