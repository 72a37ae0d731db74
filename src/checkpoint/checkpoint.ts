// Checkpoints of a native run: DIR/step-NNNNNN/rank-DDDDD.safetensors per device — its fp32 weights (or its
// shard of them: tensor `wte.weight`, the element range it holds in the metadata), 16-bit compute copies
// (`wte.weight:compute`), optimizer state (`wte.weight.exp_avg`, ...) and the step counter — then
// DIR/latest.json, the manifest, written last and atomically: a checkpoint is complete exactly when the
// manifest names it (manifest.ts). Every rank file records its step, rank and plan, checked against the
// manifest (rank-file.ts), and every tensor's checksum, checked as it is read (checksum.ts). Resuming into the same plan restores every persistent value slot by slot
// and continues bit-identically; into another plan of the model, reshard.ts moves each value to where that
// plan keeps it.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Plan } from "../plan/plan.js";
import { localIndex, type ClusterProgram } from "../lower/lower.js";
import { statePieces, type DeviceSlots } from "../lower/param-pieces.js";
import { CHECKPOINT_FORMAT, CHECKPOINT_VERSION, CheckpointError, checkDataState, dataState, planFingerprint, planParams, rankFile, readManifest, stepDir, type Manifest } from "./manifest.js";
import { reshardCheckpoint } from "./reshard.js";
import { fsyncDir, writeAtomically } from "../plan/serialize.js";
import { checkChecksum, checksumOf, recordedChecksum } from "./checksum.js";
import { openRankFile, readInto } from "./rank-file.js";
import { SAFE_BYTES, writeSafetensorsStreaming, type SafeDType } from "./safetensors.js";
import { splitText } from "./split-pieces.js";

export { CheckpointError, readManifest, type Manifest } from "./manifest.js";

/** One named value of a device: `count` elements of a slot from element `at`. */
interface Entry {
  readonly name: string;
  readonly slot: number;
  readonly at: number;
  readonly count: number;
  /** Which elements of the parameter it holds, as "from,count" (weights and their optimizer state); of a
   *  tensor-parallel rank's slice for a split parameter (then `split` says which slice). */
  readonly range?: string;
  readonly split?: string;
}

const DTYPE: Readonly<Record<string, SafeDType>> = { f32: "F32", i32: "I32", bf16: "BF16", f16: "F16" };

function entries(program: ClusterProgram, device: number): Entry[] {
  const out: Entry[] = [];
  const names = new Set<string>();
  const add = (e: Entry): void => {
    let name = e.name;
    for (let k = 2; names.has(name); k++) name = `${e.name}#${k}`; // the same weight on two stages of a device
    names.add(name);
    out.push({ ...e, name });
  };
  const mine = program.paramPieces.filter((p) => p.device === device);
  const split = (param: string): Pick<Entry, "split"> => {
    const s = program.paramSplits.get(param);
    return s ? { split: splitText({ rank: device % program.tensorParallel, ...s.split, shape: s.shape }) } : {};
  };
  for (const p of mine) add({ name: p.dtype === "f32" ? p.param : `${p.param}:compute`, slot: p.slot, at: p.at, count: p.count, range: `${p.from},${p.count}`, ...split(p.param) });
  for (const { slot, role, piece: p } of statePieces(program, device)) add({ name: `${p.param}.${role}`, slot, at: p.at, count: p.count, range: `${p.from},${p.count}`, ...split(p.param) });
  const state = program.optimizerState[localIndex(program, device)]!;
  if (state.step !== undefined) add({ name: "optimizer.step", slot: state.step, at: 0, count: 1 });
  return out;
}

/** Temporary step directories of saves whose process died (killed mid-save): never part of a checkpoint. */
function removeAbandonedSaves(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const m = /^step-\d+\.tmp-(\d+)$/.exec(name);
    if (m && (Number(m[1]) === process.pid || !alive(Number(m[1])))) rmSync(join(dir, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by someone else
  }
}

/** The processes that save one checkpoint together (the run's world: runtime/world.ts), each its own ranks'
 *  files; one process alone needs no exchanges. */
export interface SavingProcesses {
  readonly size: number;
  readonly rank: number;
  allGather(values: Float64Array, timeoutSeconds: number): Promise<Float64Array[]>;
  barrier(timeoutSeconds: number): Promise<void>;
}

const ALONE: SavingProcesses = { size: 1, rank: 0, allGather: async (v) => [v], barrier: async () => {} };

/** Saves the lowered ranks' values. Under several processes each writes its own ranks' files into one shared
 *  temporary directory (named by process 0's pid); once every process's files are durable, process 0 renames
 *  it into place and writes the manifest, so a run killed mid-save leaves the previous checkpoint whole. */
export async function saveCheckpoint(
  dir: string,
  plan: Plan,
  program: ClusterProgram,
  slots: DeviceSlots,
  step: number,
  processes: SavingProcesses = ALONE,
  timeoutSeconds = 60,
  lossScaler?: Manifest["lossScaler"],
): Promise<string> {
  const fingerprint = planFingerprint(plan);
  const final = stepDir(dir, step);
  const lead = processes.rank === 0;
  // Process 0 clears abandoned saves before anyone writes: the exchange of pids below orders the two.
  if (lead) removeAbandonedSaves(dir);
  const pids = await processes.allGather(Float64Array.of(process.pid), timeoutSeconds);
  const temp = `${final}.tmp-${pids[0]![0]}`;
  mkdirSync(temp, { recursive: true });
  program.devices.forEach((d, i) => {
    const device = program.ranks[i]!;
    // The data position and seed (the run's RNG: see DataState) in every rank file, as the manifest has them.
    // Step, rank and world too: a resume checks each against the manifest (rank-file.ts). Every tensor's
    // checksum is added as it is written (safetensors.ts).
    const metadata: Record<string, string> = { format: CHECKPOINT_FORMAT, fingerprint, device: String(device), devices: String(plan.cluster.devices), step: String(step), data_position: String(step), seed: String(plan.run?.seed ?? 0) };
    // In slot order, each slot read once and dropped when the next begins: an FSDP shard slot holds many
    // parameters' pieces, and memory stays one slot rather than the device's whole state.
    const list = entries(program, device).sort((a, b) => a.slot - b.slot);
    for (const e of list) if (e.range !== undefined) metadata[`range:${e.name}`] = e.range;
    for (const e of list) if (e.split !== undefined) metadata[`split:${e.name}`] = e.split;
    const byName = new Map(list.map((e) => [e.name, e]));
    let current: { slot: number; data: ReturnType<DeviceSlots["get"]> } | undefined;
    const bytesOf = (name: string): NodeJS.TypedArray => {
      const e = byName.get(name)!;
      if (current?.slot !== e.slot) current = { slot: e.slot, data: slots.get(device, e.slot) };
      return current.data.subarray(e.at, e.at + e.count);
    };
    const infos = list.map((e) => ({ name: e.name, dtype: DTYPE[d.slots[e.slot]!.dtype]!, shape: [e.count] }));
    writeSafetensorsStreaming(join(temp, rankFile(device)), infos, bytesOf, metadata);
  });
  fsyncDir(temp);
  await processes.barrier(timeoutSeconds);
  if (!lead) {
    await processes.barrier(timeoutSeconds); // until the manifest names it
    return final;
  }
  rmSync(final, { recursive: true, force: true });
  renameSync(temp, final);
  fsyncDir(dir);
  const params = planParams(plan);
  const roles = [...new Set(program.optimizerState.flatMap((s) => s.items.map((i) => i.role)))];
  const manifest: Manifest = { format: CHECKPOINT_FORMAT, version: CHECKPOINT_VERSION, model: plan.model.name, fingerprint, step, devices: plan.cluster.devices, dir: final.slice(dir.length + 1), params, roles, data: dataState(plan, step), ...(lossScaler && { lossScaler }) };
  // Last: until the manifest names it, the new step directory is not a checkpoint.
  writeAtomically(join(dir, "latest.json"), JSON.stringify(manifest, null, 2) + "\n");
  await processes.barrier(timeoutSeconds);
  return final;
}

/** What a resume restored: the manifest (its step is the data position), whether it came from another plan,
 *  and the rank files read unverified (no checksums: written by an fsm before them). */
export interface Restored {
  readonly manifest: Manifest;
  readonly resharded: boolean;
  readonly unverified: readonly string[];
}

/** Restores every persistent value of every device. */
export function loadCheckpoint(dir: string, plan: Plan, program: ClusterProgram, slots: DeviceSlots): Restored {
  const m = readManifest(dir);
  if (m.model !== plan.model.name) throw new CheckpointError(`${dir} is a checkpoint of model ${m.model}, not ${plan.model.name}`);
  checkDataState(dir, m, plan);
  // Another plan of the model (devices, stages, sharding, precision): every value moved to where this plan keeps it.
  if (m.fingerprint !== planFingerprint(plan)) {
    const { unverified } = reshardCheckpoint(dir, m, plan, program, slots);
    return { manifest: m, resharded: true, unverified };
  }
  // Every rank file's header and metadata checked before any slot is touched.
  const files = program.ranks.map((device) => openRankFile(dir, m, device));
  const unverified = files.filter((f) => !f.checksummed).map((f) => f.path);
  program.devices.forEach((d, i) => {
    const device = program.ranks[i]!;
    const { path, tensors, metadata, dataStart } = files[i]!;
    // Every tensor's type checked before any of its slots is touched; then slot by slot, each tensor's bytes read straight
    // into its place (one slot in memory at a time, never the whole file) and checked against its checksum.
    const bySlot = new Map<number, { e: Entry; offset: number; crc: number | undefined }[]>();
    for (const e of entries(program, device)) {
      const t = tensors[e.name];
      const dtype = DTYPE[d.slots[e.slot]!.dtype]!;
      if (!t) throw new CheckpointError(`${path} has no tensor ${e.name}`);
      const bytes = t.data_offsets[1] - t.data_offsets[0];
      if (t.dtype !== dtype || t.shape.length !== 1 || t.shape[0] !== e.count || bytes !== e.count * SAFE_BYTES[dtype]) {
        throw new CheckpointError(`${path}: ${e.name} is ${t.dtype}[${t.shape}] (${bytes} bytes), expected ${dtype}[${e.count}]`);
      }
      if (e.range !== undefined && metadata[`range:${e.name}`] !== e.range) throw new CheckpointError(`${path}: ${e.name} holds elements ${metadata[`range:${e.name}`]}, this plan needs ${e.range}`);
      if (metadata[`split:${e.name}`] !== e.split) throw new CheckpointError(`${path}: ${e.name} is saved as ${metadata[`split:${e.name}`] ?? "the whole tensor"}, this plan holds ${e.split ?? "the whole tensor"}`);
      bySlot.set(e.slot, [...(bySlot.get(e.slot) ?? []), { e, offset: dataStart + t.data_offsets[0], crc: recordedChecksum(path, metadata, e.name) }]);
    }
    for (const [slot, list] of bySlot) {
      const whole = slots.get(device, slot);
      const bytes = Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength);
      for (const { e, offset, crc } of list) {
        const at = e.at * whole.BYTES_PER_ELEMENT;
        const length = e.count * whole.BYTES_PER_ELEMENT;
        readInto(path, offset, bytes, at, length);
        checkChecksum(path, e.name, crc, checksumOf(bytes.subarray(at, at + length)));
      }
      slots.set(device, slot, whole);
    }
  });
  return { manifest: m, resharded: false, unverified };
}
