// What a CUDA device holds besides a lowered program's arena: the scratch its kernels need (per stream, the
// largest any of its instructions asks for, by each kernel's own formula in the addon), its error record, and
// cuBLAS's workspace.
// Compile adds it to a GPU plan's predicted memory, so the plan prices the memory the device takes.
import { nativeDeviceReservedBytes, type NativeKernelShape } from "../native/binding.js";
import type { DeviceProgram } from "./device-program.js";

/** The bytes a CUDA device reserves for this program (the same on the GPU and its emulation). */
export function gpuReservedBytes(program: DeviceProgram): number {
  // Calls with the same op, operand shapes and attributes need the same scratch: each is asked once.
  const calls = new Map<string, NativeKernelShape>();
  for (const ins of program.instructions) {
    if (ins.op.startsWith("comm.")) continue;
    const call: NativeKernelShape = {
      op: ins.op,
      inputs: ins.inputs.map((s) => ({ shape: program.slots[s]!.shape, dtype: program.slots[s]!.dtype })),
      outputs: ins.outputs.map((s) => ({ shape: program.slots[s]!.shape, dtype: program.slots[s]!.dtype })),
      attrs: ins.attrs,
      stream: ins.stream,
    };
    const key = JSON.stringify(call);
    if (!calls.has(key)) calls.set(key, call);
  }
  return nativeDeviceReservedBytes([...calls.values()]);
}
