// Where a lowered program (lower.ts) keeps parameter values and optimizer state, for anything with slot
// access to its devices — the native executor, the sequential reference, checkpoints: parameters written into
// every replica and shard from their full values (or from any source of element ranges), read back whole.
import { joinRanks, sliceForRank } from "../graph/param-split.js";
import { runNativeKernel } from "../native/binding.js";
import { localIndex, type ClusterProgram } from "./lower.js";

/** Slot access by device (global rank) and slot id. */
export interface DeviceSlots {
  set(device: number, slot: number, data: Float32Array | Int32Array | Uint16Array): void;
  get(device: number, slot: number): Float32Array | Int32Array | Uint16Array;
}

/** One device's (global rank's) optimizer state as pieces: a state slot is laid out as the fp32 weights it belongs to, so each
 *  of their pieces has its counterpart, at the same place, on the state's slot (for checkpoints). */
export function statePieces(program: ClusterProgram, device: number): { slot: number; role: string; piece: ClusterProgram["paramPieces"][number] }[] {
  const weights = program.paramPieces.filter((p) => p.device === device && p.dtype === "f32");
  return program.optimizerState[localIndex(program, device)]!.items.flatMap(({ item, role, slot }) => weights.filter((p) => p.slot === item.param).map((piece) => ({ slot, role, piece })));
}

/** A slot's element count on a device (global rank), from the program (reading the slot would copy it). */
export function slotElements(program: ClusterProgram, device: number, slot: number): number {
  return program.devices[localIndex(program, device)]!.slots[slot]!.shape.reduce((a, b) => a * b, 1);
}

/** A tensor-parallel device's value of `name` (split parameter `param`, or its optimizer state `param.role`):
 *  its rank's slice of the whole value, each rank's cut once and kept, `keep` slices at most (then the kept
 *  ones are dropped: readers go slot by slot, whose pieces come from a few tensors). */
export function rankSlices(program: ClusterProgram, whole: (name: string, numel: number) => Float32Array, keep = Infinity): (name: string, param: string, device: number) => Float32Array {
  const cut = new Map<string, Float32Array>();
  return (name, param, device) => {
    const split = program.paramSplits.get(param);
    if (!split) throw new Error(`internal: '${param}' is not split over tensor-parallel ranks`);
    const rank = device % program.tensorParallel;
    const key = `${name}#${rank}`;
    let slice = cut.get(key);
    if (!slice) {
      if (cut.size >= keep) cut.clear();
      const numel = split.shape.reduce((a, b) => a * b, 1);
      cut.set(key, (slice = Float32Array.from(sliceForRank(whole(name, numel), split.shape, split.split, rank))));
    }
    return slice;
  };
}

/** Writes every parameter piece of every device from the full values: fp32 master weights as they are,
 *  16-bit compute copies rounded by the addon's own cast kernel (the bits the step's casts would give). */
export function writeParams(cluster: DeviceSlots, program: ClusterProgram, values: (name: string) => Float32Array): void {
  // A tensor-parallel device's pieces are of its slice of a split parameter.
  const slice = rankSlices(program, values);
  writeParamPieces(cluster, program, (name, from, count, into, at, device) =>
    into.set((program.paramSplits.has(name) ? slice(name, name, device) : values(name)).subarray(from, from + count), at),
  );
}

/** Fills `count` elements of parameter `name` (on `device`: a tensor-parallel rank's slice of it) from
 *  element `from` into `into` at `at`. */
export type PieceSource = (name: string, from: number, count: number, into: Float32Array, at: number, device: number) => void;

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
    for (const p of parts) fill(p.param, p.from, p.count, data, p.at, device);
    if (dtype === "f32") cluster.set(device, slot, data);
    else cluster.set(device, slot, runNativeKernel("fsm_cast", [{ data, shape: [data.length] }], {}, [{ shape: [data.length], dtype }])[0]!);
  }
}

/** A parameter's full value, from the (fp32) pieces that tile it. */
export function readParam(cluster: DeviceSlots, program: ClusterProgram, name: string): Float32Array {
  const reader = program.paramReaders.get(name);
  if (!reader) throw new Error(`no parameter '${name}' held whole by ranks [${program.ranks.join(", ")}]`);
  const values = reader.ranks.map((pieces) => {
    const out = new Float32Array(pieces.reduce((n, p) => n + p.count, 0));
    for (const p of pieces) out.set((cluster.get(p.device, p.slot) as Float32Array).subarray(p.at, p.at + p.count), p.from);
    return out;
  });
  return reader.split ? Float32Array.from(joinRanks(values, reader.split.shape, reader.split.split)) : values[0]!;
}
