// Where `fsm run --inject-fault` strikes (cluster-engine.ts arms it in the native cluster for one step): an
// instruction of the chosen device, picked deterministically from its lowered program so that the failure
// happens mid-step with peers waiting on the device, exercising the real abort path.
import { parseAction } from "../schedule/action.js";
import { localIndex, type ClusterProgram } from "../lower/lower.js";
import { COMM, COMPUTE } from "../lower/device-program.js";
import { EngineError, type InjectedFault } from "./engine-types.js";

/** The instruction an injected fault strikes, chosen so the failure is a real mid-step one: kernel / comm the
 *  middle kernel of the device's compute stream / the middle collective or send/recv of its communication
 *  stream (its peers are then waiting on it). nan poisons a value of micro-batch 0's forward: on a device that
 *  computes losses the prediction its loss kernel reads, so the NaN enters the loss through that kernel as a
 *  real overflow would; on an earlier pipeline stage the last activation it computes, which it sends on and the later stages
 *  carry to a loss (relu keeps NaN, as PyTorch's does). hang stops the device at its middle compute kernel: its
 *  peers then wait for it in their next collective or receive until the communicator's timeout names it. */
export function faultTarget(program: ClusterProgram, fault: InjectedFault): { instruction: number; kind: "fail" | "nan" | "hang" } {
  const dev = program.devices[localIndex(program, fault.device)]!;
  const isComm = (op: string): boolean => op.startsWith("comm.");
  const isKernel = (i: number): boolean => dev.instructions[i]!.stream === COMPUTE && !isComm(dev.instructions[i]!.op);
  const at = (pick: (ins: (typeof dev.instructions)[number], i: number) => boolean): number[] => dev.instructions.flatMap((ins, i) => (pick(ins, i) ? [i] : []));
  const spec = `--inject-fault ${fault.kind}@${fault.device}`;
  if (fault.kind === "nan") {
    const float = (slot: number): boolean => dev.slots[slot]!.dtype !== "i32";
    const forward = at((ins, i) => {
      const a = parseAction(ins.action);
      return isKernel(i) && ins.guard === undefined && a.ok && a.action.kind === "F" && a.action.mb === 0 && ins.outputs.some(float);
    });
    if (forward.length === 0) throw new EngineError(`${spec}: device ${fault.device} computes no forward to poison`);
    const lastWriter = (slot: number, before = Infinity): number => forward.filter((i) => i < before && dev.instructions[i]!.outputs.includes(slot)).pop() ?? -1;
    const loss = program.lossSlots.find((l) => l.device === fault.device); // replica-major: micro-batch 0 first
    const lossKernel = loss === undefined ? -1 : lastWriter(loss.slot);
    if (lossKernel < 0) return { instruction: forward[forward.length - 1]!, kind: "nan" };
    // Of the loss kernel's float inputs, those computed in this step (not the fed targets): the latest is the prediction.
    const prediction = Math.max(...dev.instructions[lossKernel]!.inputs.filter(float).map((slot) => lastWriter(slot, lossKernel)), -1);
    return { instruction: prediction >= 0 ? prediction : lossKernel, kind: "nan" };
  }
  const kernel = fault.kind === "kernel" || fault.kind === "hang";
  const list = at((ins) => (kernel ? ins.stream === COMPUTE && !isComm(ins.op) : ins.stream === COMM && isComm(ins.op)));
  if (list.length === 0) throw new EngineError(`${spec}: device ${fault.device} has no ${kernel ? "compute kernels" : "communication instructions (it exchanges nothing with other devices)"}`);
  return { instruction: list[list.length >> 1]!, kind: fault.kind === "hang" ? "hang" : "fail" };
}
