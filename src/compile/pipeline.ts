// Step 6a of compile: the lowered pipeline schedule (one rank per pipeline rank) → one program per pipeline
// rank: compute actions split into layer segments, p2p actions with global peers, an OPTIMIZER per stage.
import { isComputeKind, isP2PKind, p2pAction, shardAction, type P2PKind } from "../schedule/action.js";
import type { LoweredSchedule } from "../schedule/lowered.js";
import { meshRank } from "../plan/plan.js";
import { newAction, type Program, type Rendezvous } from "./program.js";
import type { StageCostModel } from "./stage-costs.js";
import type { StageAssignment } from "./stages.js";

export interface PipelinePrograms {
  readonly programs: Program[];
  readonly rendezvous: Rendezvous[];
}

export function pipelinePrograms(
  lowered: LoweredSchedule,
  stages: readonly StageAssignment[],
  costs: StageCostModel,
  mesh: { readonly dataParallel: number; readonly tensorParallel: number },
  optimizerSeconds: (stage: number) => number,
): PipelinePrograms {
  const local = new Int32Array(lowered.actions.length).fill(-1);
  const programs: Program[] = lowered.streams.map((st, rank) => {
    const prog: Program = {
      pipeRank: rank,
      stages: stages.filter((s) => s.pipeRank === rank).map((s) => s.index),
      ranks: stages.find((s) => s.pipeRank === rank)!.ranks,
      actions: [],
      compute: [],
      comm: [],
    };
    for (const id of [...st.compute, ...st.comm]) {
      const la = lowered.actions[id]!;
      const { kind, stage, mb } = la.action;
      local[id] = prog.actions.length;
      if (isComputeKind(kind)) {
        const layers = costs.layerOrder(stage, kind);
        prog.compute.push(prog.actions.length);
        prog.actions.push(newAction({ action: la.action, stream: "compute", layers, seconds: layers.map((l) => costs.layerSeconds(kind, l)) }));
      } else if (isP2PKind(kind)) {
        const peer = la.action.peer!;
        const send = kind === "SEND_F" || kind === "SEND_B";
        // A RECV takes its SEND's time: the transfer out of the sending stage.
        const from = send ? stage : kind === "RECV_F" ? stage - 1 : stage + 1;
        const bytes = costs.boundaryBytes(from, mb!, kind.endsWith("_F") ? "forward" : "backward");
        const seconds = costs.transfer(rank, peer, bytes);
        prog.comm.push(prog.actions.length);
        prog.actions.push(newAction({ action: p2pAction(kind as P2PKind, stage, mb!, meshRank(mesh, peer, 0)), stream: "comm", seconds: [seconds] }));
      } else {
        throw new Error(`internal: the lowered schedule holds ${kind}, which is neither compute nor p2p`);
      }
    }
    return prog;
  });
  // Dependencies and rendezvous, now that every action has its program-local id.
  const rendezvous: Rendezvous[] = [];
  const withGroup = new Map<number, number>();
  for (const la of lowered.actions) {
    const prog = programs[la.rank]!;
    const a = prog.actions[local[la.id]!]!;
    for (const d of la.deps) {
      if (lowered.actions[d]!.rank !== la.rank) throw new Error(`internal: lowered action ${la.id} depends on action ${d} of another rank`);
      a.deps.push(local[d]!);
    }
    if (la.match !== undefined && !withGroup.has(la.id)) {
      const m = lowered.actions[la.match]!;
      const group = rendezvous.length;
      rendezvous.push({ members: [{ program: la.rank, action: local[la.id]! }, { program: m.rank, action: local[m.id]! }] });
      withGroup.set(la.id, group).set(m.id, group);
    }
  }
  for (const [id, group] of withGroup) {
    const la = lowered.actions[id]!;
    const prog = programs[la.rank]!;
    const i = local[id]!;
    prog.actions[i] = { ...prog.actions[i]!, rendezvous: group };
  }
  // The optimizer step of each stage ends its rank's compute stream.
  for (const prog of programs) {
    for (const s of prog.stages) {
      prog.compute.push(prog.actions.length);
      prog.actions.push(newAction({ action: shardAction("OPTIMIZER", s), stream: "compute", seconds: [optimizerSeconds(s)] }));
    }
  }
  return { programs, rendezvous };
}
