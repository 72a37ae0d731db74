// Checkpoints of a native run: DIR/step-NNNNNN/rank-DDDDD.safetensors per device — its fp32 weights (or its
// shard of them: tensor `wte.weight`, the element range it holds in the metadata), 16-bit compute copies
// (`wte.weight:compute`), optimizer state (`wte.weight.exp_avg`, ...) and the step counter — then
// DIR/latest.json, the manifest, written last and atomically: a checkpoint is complete exactly when the
// manifest names it. The manifest records the step, the data position (the next batch index: data is
// deterministic by step), the fp16 loss scaler, and the plan's fingerprint, so resuming restores every
// persistent value and continues bit-identically — into the same plan only (resharding is not done yet).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Plan } from "../plan/plan.js";
import { writeAtomically } from "../plan/serialize.js";
import type { ClusterProgram } from "../runtime/cluster-program.js";
import type { DeviceSlots } from "../runtime/cluster-step.js";
import { readSafetensors, writeSafetensors, type SafeDType, type SafeTensor } from "./safetensors.js";

export const CHECKPOINT_FORMAT = "fsm-checkpoint";
export const CHECKPOINT_VERSION = 1;

export class CheckpointError extends Error {}

export interface Manifest {
  readonly format: typeof CHECKPOINT_FORMAT;
  readonly version: number;
  readonly model: string;
  readonly fingerprint: string;
  /** Steps completed; the next run's first batch is this index. */
  readonly step: number;
  readonly devices: number;
  readonly dir: string;
  readonly lossScaler?: { readonly scale: number; readonly clean: number };
  /** Every parameter's full shape (rank files hold 1-D pieces of them). */
  readonly params?: Readonly<Record<string, readonly number[]>>;
  /** Optimizer state roles saved per parameter (`exp_avg`, ...). */
  readonly roles?: readonly string[];
}

/** One named value of a device: `count` elements of a slot from element `at`. */
interface Entry {
  readonly name: string;
  readonly slot: number;
  readonly at: number;
  readonly count: number;
  /** Which elements of the parameter it holds, as "from,count" (weights and their optimizer state). */
  readonly range?: string;
}

const DTYPE: Readonly<Record<string, SafeDType>> = { f32: "F32", i32: "I32", bf16: "BF16", f16: "F16" };

/** What identifies a plan's persistent state: the training graph, the settings and how state is laid out. */
export function planFingerprint(plan: Plan): string {
  const layout = { graph: plan.graph, settings: plan.settings, devices: plan.cluster.devices, stages: plan.stages.map((s) => [s.layers, s.ranks]), shard: plan.shard.map((s) => [s.strategy, s.units, s.owners, s.broadcastBuckets]) };
  return createHash("sha256").update(JSON.stringify(layout)).digest("hex").slice(0, 32);
}

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
  for (const p of mine) add({ name: p.dtype === "f32" ? p.param : `${p.param}:compute`, slot: p.slot, at: p.at, count: p.count, range: `${p.from},${p.count}` });
  const state = program.optimizerState[device]!;
  for (const { item, role, slot } of state.items) {
    // Optimizer state is laid out as the weights it belongs to: the same pieces, on the state's slot.
    for (const p of mine.filter((x) => x.slot === item.param && x.dtype === "f32")) add({ name: `${p.param}.${role}`, slot, at: p.at, count: p.count, range: `${p.from},${p.count}` });
  }
  if (state.step !== undefined) add({ name: "optimizer.step", slot: state.step, at: 0, count: 1 });
  return out;
}

const stepDir = (dir: string, step: number): string => join(dir, `step-${String(step).padStart(6, "0")}`);
const rankFile = (device: number): string => `rank-${String(device).padStart(5, "0")}.safetensors`;

export function saveCheckpoint(dir: string, plan: Plan, program: ClusterProgram, slots: DeviceSlots, step: number, lossScaler?: Manifest["lossScaler"]): string {
  const fingerprint = planFingerprint(plan);
  const final = stepDir(dir, step);
  const temp = `${final}.tmp-${process.pid}`;
  rmSync(temp, { recursive: true, force: true });
  mkdirSync(temp, { recursive: true });
  program.devices.forEach((d, device) => {
    const tensors = new Map<string, SafeTensor>();
    const metadata: Record<string, string> = { format: CHECKPOINT_FORMAT, fingerprint, device: String(device), step: String(step) };
    // One read per slot: an FSDP shard slot holds the pieces of many parameters.
    const read = new Map<number, ReturnType<DeviceSlots["get"]>>();
    for (const e of entries(program, device)) {
      if (!read.has(e.slot)) read.set(e.slot, slots.get(device, e.slot));
      const part = read.get(e.slot)!.subarray(e.at, e.at + e.count);
      tensors.set(e.name, { dtype: DTYPE[d.slots[e.slot]!.dtype]!, shape: [e.count], data: new Uint8Array(part.buffer, part.byteOffset, part.byteLength) });
      if (e.range !== undefined) metadata[`range:${e.name}`] = e.range;
    }
    writeSafetensors(join(temp, rankFile(device)), tensors, metadata);
  });
  rmSync(final, { recursive: true, force: true });
  renameSync(temp, final);
  const params = Object.fromEntries(plan.graph.params.map((p) => [p.name, plan.graph.tensors[p.tensor]!.shape.map(Number)]));
  const roles = [...new Set(program.optimizerState.flatMap((s) => s.items.map((i) => i.role)))];
  const manifest: Manifest = { format: CHECKPOINT_FORMAT, version: CHECKPOINT_VERSION, model: plan.model.name, fingerprint, step, devices: plan.cluster.devices, dir: final.slice(dir.length + 1), params, roles, ...(lossScaler && { lossScaler }) };
  // Last: until the manifest names it, the new step directory is not a checkpoint.
  writeAtomically(join(dir, "latest.json"), JSON.stringify(manifest, null, 2) + "\n");
  return final;
}

export function readManifest(dir: string): Manifest {
  const path = join(dir, "latest.json");
  if (!existsSync(path)) throw new CheckpointError(`${dir} holds no complete checkpoint (no latest.json: a save that never finished leaves none)`);
  let m: Manifest;
  try {
    m = JSON.parse(readFileSync(path, "utf8")) as Manifest;
  } catch (e) {
    throw new CheckpointError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (m.format !== CHECKPOINT_FORMAT) throw new CheckpointError(`${path} is not an fsm checkpoint manifest`);
  if (m.version > CHECKPOINT_VERSION) throw new CheckpointError(`${path} was written by a newer fsm (checkpoint version ${m.version}; this fsm reads ${CHECKPOINT_VERSION})`);
  if (!Number.isInteger(m.step) || m.step < 0 || typeof m.dir !== "string") throw new CheckpointError(`${path}: malformed manifest`);
  return m;
}

/** Restores every persistent value of every device; returns the manifest (its step is the data position). */
export function loadCheckpoint(dir: string, plan: Plan, program: ClusterProgram, slots: DeviceSlots): Manifest {
  const m = readManifest(dir);
  if (m.model !== plan.model.name) throw new CheckpointError(`${dir} is a checkpoint of model ${m.model}, not ${plan.model.name}`);
  if (m.fingerprint !== planFingerprint(plan)) {
    throw new CheckpointError(`${dir} was saved from a different plan of ${m.model} (${m.devices} devices; this plan has ${plan.cluster.devices}): resuming into another plan (resharding) is not implemented yet`);
  }
  program.devices.forEach((d, device) => {
    const path = join(dir, m.dir, rankFile(device));
    const { tensors, metadata } = readSafetensors(path);
    if (metadata.fingerprint !== m.fingerprint) throw new CheckpointError(`${path} belongs to another checkpoint (fingerprint ${metadata.fingerprint})`);
    // Each slot read once, filled from every tensor it holds, written back once.
    const written = new Map<number, ReturnType<DeviceSlots["get"]>>();
    for (const e of entries(program, device)) {
      const t = tensors.get(e.name);
      const dtype = DTYPE[d.slots[e.slot]!.dtype]!;
      if (!t) throw new CheckpointError(`${path} has no tensor ${e.name}`);
      if (t.dtype !== dtype || t.shape.length !== 1 || t.shape[0] !== e.count) throw new CheckpointError(`${path}: ${e.name} is ${t.dtype}[${t.shape}], expected ${dtype}[${e.count}]`);
      if (e.range !== undefined && metadata[`range:${e.name}`] !== e.range) throw new CheckpointError(`${path}: ${e.name} holds elements ${metadata[`range:${e.name}`]}, this plan needs ${e.range}`);
      if (!written.has(e.slot)) written.set(e.slot, slots.get(device, e.slot));
      const whole = written.get(e.slot)!;
      new Uint8Array(whole.buffer, whole.byteOffset + e.at * whole.BYTES_PER_ELEMENT, e.count * whole.BYTES_PER_ELEMENT).set(t.data);
    }
    for (const [slot, whole] of written) slots.set(device, slot, whole);
  });
  return m;
}
