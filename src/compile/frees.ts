// Step 6e of compile: one FREE per FSDP all-gather, so that the runtime knows when a gathered unit may be
// released. It goes on the compute stream right after the compute action that last uses the unit (the one
// the gather's lifetime ends in: the forward with reshard_after_forward, the backward otherwise) and depends
// on that action and on its ALL_GATHER, as lowered.ts's FREE rule asks. On the compute stream it finds both
// already finished when it comes up, and it takes no time, so the predicted step is unchanged; on the comm
// stream it would make later gathers (the prefetch) wait for the end of that compute action.
//
// The memory plan keeps releasing the unit at `toLayer` (part-way through the action, after the unit's last
// layer): FREE is bookkeeping, the arena offsets already say when the bytes are reused.
import { shardAction } from "../schedule/action.js";
import type { Lifetime } from "./lifetimes.js";
import { newAction, type Program } from "./program.js";

/** Adds the FREEs of the gathered units in `lifetimes` (collectives.ts's placeGathers reports them). */
export function emitFrees(programs: readonly Program[], lifetimes: readonly Lifetime[]): void {
  // Per program and compute action: the FREEs that follow it, in the order their gathers were placed.
  const after = programs.map(() => new Map<number, number[]>());
  for (const l of lifetimes) {
    if (l.kind !== "gathered") continue;
    const prog = programs[l.program]!;
    const gather = prog.actions[l.from]!.action;
    if (gather.kind !== "ALL_GATHER") throw new Error(`internal: gathered buffer '${l.name}' does not start at an ALL_GATHER`);
    const id = prog.actions.length;
    const free = shardAction("FREE", gather.stage, { ...(gather.mb !== undefined && { mb: gather.mb }), ...(gather.unit !== undefined && { unit: gather.unit }) });
    prog.actions.push(newAction({ action: free, stream: "compute", seconds: [0], deps: [l.to, l.from] }));
    const list = after[l.program]!.get(l.to) ?? [];
    list.push(id);
    after[l.program]!.set(l.to, list);
  }
  programs.forEach((prog, p) => {
    const frees = after[p]!;
    if (frees.size === 0) return;
    prog.compute = prog.compute.flatMap((id) => [id, ...(frees.get(id) ?? [])]);
  });
}
