// Driving a lowered cluster step (cluster-program.ts) on any executor with device-slot access — the native
// cluster or the sequential reference (cluster-reference.ts): parameters written into every replica and
// shard from their full values, each replica's slice of the batch fed to its devices, losses and
// parameters read back.
import type { Batch } from "../interp/session.js";
import { runNativeKernel } from "../native/binding.js";
import type { ClusterProgram } from "./cluster-program.js";
import { sliceBatch } from "./reference-step.js";

export interface DeviceSlots {
  set(device: number, slot: number, data: Float32Array | Int32Array | Uint16Array): void;
  get(device: number, slot: number): Float32Array | Int32Array | Uint16Array;
}

/** One device's optimizer state as pieces: a state slot is laid out as the fp32 weights it belongs to, so each
 *  of their pieces has its counterpart, at the same place, on the state's slot (for checkpoints). */
export function statePieces(program: ClusterProgram, device: number): { slot: number; role: string; piece: ClusterProgram["paramPieces"][number] }[] {
  const weights = program.paramPieces.filter((p) => p.device === device && p.dtype === "f32");
  return program.optimizerState[device]!.items.flatMap(({ item, role, slot }) => weights.filter((p) => p.slot === item.param).map((piece) => ({ slot, role, piece })));
}

/** A slot's element count, from the program (reading the slot to learn it would copy it). */
export function slotElements(program: ClusterProgram, device: number, slot: number): number {
  return program.devices[device]!.slots[slot]!.shape.reduce((a, b) => a * b, 1);
}

/** Writes every parameter piece of every device from the full values: fp32 master weights as they are,
 *  16-bit compute copies rounded by the addon's own cast kernel (the bits the step's casts would give). */
export function writeParams(cluster: DeviceSlots, program: ClusterProgram, values: (name: string) => Float32Array): void {
  writeParamPieces(cluster, program, (name, from, count, into, at) => into.set(values(name).subarray(from, from + count), at));
}

/** Fills `count` elements of parameter `name` from element `from` into `into` at `at`. */
export type PieceSource = (name: string, from: number, count: number, into: Float32Array, at: number) => void;

/** writeParams from any source of element ranges (a checkpoint's pieces: no whole tensor needs to exist). */
export function writeParamPieces(cluster: DeviceSlots, program: ClusterProgram, fill: PieceSource): void {
  // Shards are written whole, padding included, so stale arena bytes never reach a gather.
  const bySlot = new Map<string, { device: number; slot: number; parts: typeof program.paramPieces[number][] }>();
  for (const p of program.paramPieces) {
    const key = `${p.device}:${p.slot}`;
    if (!bySlot.has(key)) bySlot.set(key, { device: p.device, slot: p.slot, parts: [] });
    bySlot.get(key)!.parts.push(p);
  }
  for (const { device, slot, parts } of bySlot.values()) {
    const dtype = parts[0]!.dtype;
    const data = new Float32Array(slotElements(program, device, slot));
    for (const p of parts) fill(p.param, p.from, p.count, data, p.at);
    if (dtype === "f32") cluster.set(device, slot, data);
    else cluster.set(device, slot, runNativeKernel("fsm_cast", [{ data, shape: [data.length] }], {}, [{ shape: [data.length], dtype }])[0]!);
  }
}

/** A parameter's full value, from the (fp32) pieces that tile it. */
export function readParam(cluster: DeviceSlots, program: ClusterProgram, name: string): Float32Array {
  const pieces = program.paramReaders.get(name);
  if (!pieces) throw new Error(`no parameter '${name}'`);
  const out = new Float32Array(pieces.reduce((n, p) => n + p.count, 0));
  for (const p of pieces) out.set((cluster.get(p.device, p.slot) as Float32Array).subarray(p.at, p.at + p.count), p.from);
  return out;
}

/** Feeds replica r's micro-batch j rows (r·m + j, as the 1-device plan orders them) to every device. */
export function feedBatch(cluster: DeviceSlots, program: ClusterProgram, batch: Batch, microBatches: number, microBatchSize: number): void {
  program.inputs.forEach(({ replica, slots }, device) => {
    slots.forEach((named, j) => {
      const names = Object.keys(named);
      if (names.length === 0) return;
      const rows = sliceBatch(batch, (replica * microBatches + j) * microBatchSize, microBatchSize);
      for (const name of names) {
        if (!rows[name]) throw new Error(`the batch has no value for input '${name}'`);
        cluster.set(device, named[name]!, rows[name]!.data as Float32Array | Int32Array);
      }
    });
  });
}

/** The loss of every (replica, micro-batch), replica-major. */
export function lossValues(cluster: DeviceSlots, program: ClusterProgram): number[] {
  return program.lossSlots.map(({ device, slot }) => cluster.get(device, slot)[0]!);
}

/** The mean loss over every replica and micro-batch, summed in replica-major order. */
export function meanLoss(cluster: DeviceSlots, program: ClusterProgram): number {
  return mean(lossValues(cluster, program));
}

export function mean(losses: readonly number[]): number {
  let sum = 0;
  for (const l of losses) sum += l;
  return sum / losses.length;
}
