// Resuming a checkpoint into another plan of the same model — other devices, stages, shard strategy or
// precision, tensor-parallel degree (FairScale's "consolidate, then load into the new world size", without the
// consolidated file; a tensor-parallel rank's slices cut from the whole, split-pieces.ts).
// Every value the new plan keeps (weights in every replica, stage copy and FSDP shard, each optimizer state
// role) is read from the old ranks' pieces that overlap it (pieces.ts), one slot at a time; 16-bit compute
// copies are cast from the fp32 weights as at the start of a run. Values move exactly, so the resumed run equals the
// uninterrupted one up to the new plan's reduction order.
import type { Plan } from "../plan/plan.js";
import type { ClusterProgram } from "../lower/lower.js";
import { rankSlices, slotElements, statePieces, writeParamPieces, type DeviceSlots } from "../lower/param-pieces.js";
import { CheckpointError, planParams, type Manifest } from "./manifest.js";
import { openPieces, type CheckpointPieces } from "./pieces.js";

/** Element ranges of `name` (a parameter or `param.role`, of parameter `param`) as device `device` holds
 *  it: for a parameter this plan splits, of the device's tensor-parallel slice, cut from the whole tensor
 *  (a few slices kept, so memory stays a few tensors); else read straight from the old ranks' pieces. */
function sliceSource(program: ClusterProgram, pieces: CheckpointPieces): (name: string, param: string, from: number, count: number, into: Float32Array, at: number, device: number) => void {
  const slice = rankSlices(program, (name, numel) => pieces.read(name, numel), 8);
  return (name, param, from, count, into, at, device) => {
    if (!program.paramSplits.has(param)) return pieces.readRange(name, from, count, into, at);
    const s = slice(name, param, device);
    if (from + count > s.length) throw new CheckpointError(`internal: device ${device}'s piece [${from}, ${from + count}) of ${name} lies outside its slice of ${s.length}`);
    into.set(s.subarray(from, from + count), at);
  };
}

/** Returns the rank files read unverified (no checksums: written by an fsm before them). */
export function reshardCheckpoint(dir: string, m: Manifest, plan: Plan, program: ClusterProgram, slots: DeviceSlots): { unverified: readonly string[] } {
  const why = `${dir} was saved from another plan of ${m.model} (${m.devices} device${m.devices === 1 ? "" : "s"}; this plan has ${plan.cluster.devices})`;
  if (!m.params) throw new CheckpointError(`${why} and records no parameter shapes (written by an older fsm): it resumes into its own plan only`);
  const shapes = planParams(plan);
  const problems: string[] = [];
  for (const [name, shape] of Object.entries(shapes)) {
    const saved = m.params[name];
    if (!saved) problems.push(`missing ${name}`);
    else if (saved.join(",") !== shape.join(",")) problems.push(`${name} is [${saved.join(", ")}], this plan's is [${shape.join(", ")}]`);
  }
  for (const name of Object.keys(m.params)) if (!(name in shapes)) problems.push(`unexpected ${name}`);
  const roles = new Set(program.optimizerState.flatMap((s) => s.items.map((i) => i.role)));
  const saved = new Set(m.roles ?? []);
  for (const role of roles) if (!saved.has(role)) problems.push(`no optimizer state '${role}' (saved: ${[...saved].join(", ") || "none"}; another optimizer?)`);
  if (problems.length > 0) throw new CheckpointError(`${why} whose state does not fit this one: ${problems.join("; ")}`);

  // Slot by slot, each piece read straight from the old ranks' byte ranges: memory is one slot, not the model.
  const pieces = openPieces(dir, m);
  const source = sliceSource(program, pieces);
  writeParamPieces(slots, program, (name, from, count, into, at, device) => source(name, name, from, count, into, at, device));

  program.optimizerState.forEach((state, i) => {
    const device = program.ranks[i]!; // the state is listed per lowered device; slots are named by global rank
    // Slot by slot: each state slot filled from the old ranks' pieces of its role, then written once.
    const bySlot = new Map<number, ReturnType<typeof statePieces>>();
    for (const s of statePieces(program, device)) bySlot.set(s.slot, [...(bySlot.get(s.slot) ?? []), s]);
    for (const [slot, list] of bySlot) {
      const data = new Float32Array(slotElements(program, device, slot));
      for (const { role, piece: p } of list) source(`${p.param}.${role}`, p.param, p.from, p.count, data, p.at, device);
      slots.set(device, slot, data);
    }
    if (state.step === undefined) return;
    if (!pieces.step) throw new CheckpointError(`${why} and holds no optimizer step counter, which this plan's optimizer needs`);
    const { dtype, data } = pieces.step;
    const view = dtype === "I32" ? new Int32Array(data.buffer, data.byteOffset, data.length / 4) : new Float32Array(data.buffer, data.byteOffset, data.length / 4);
    const current = slots.get(device, state.step);
    if (current.length !== view.length) throw new CheckpointError(`${why}: its step counter has ${view.length} elements, this plan's ${current.length}`);
    slots.set(device, state.step, current instanceof Int32Array ? Int32Array.from(view) : Float32Array.from(view));
  });
  return { unverified: pieces.unverified };
}
