// The discrete-event engine that runs programs as the plan's execution rules say (plan.ts, PlanAction): two
// streams per program, each running its actions in order as soon as their dependencies allow; compute
// actions run layer by layer so collectives can hang on points inside them; rendezvous start together.
import { formatAction } from "../schedule/action.js";
import type { Program, ProgAction, Rendezvous } from "./program.js";

export interface ProgramRun {
  readonly start: Float64Array;
  readonly end: Float64Array;
  /** Per action: start and end of each segment (NaN until run); a compute action's segment is one layer. */
  readonly segStart: readonly Float64Array[];
  readonly segEnd: readonly Float64Array[];
  /** Seconds the compute stream was busy. */
  readonly computeBusy: number;
}

export interface EngineRun {
  readonly programs: readonly ProgramRun[];
  readonly complete: boolean;
  readonly makespan: number;
  /** When incomplete: the action at the front of each stuck stream. */
  readonly stuck: readonly string[];
}

export interface EngineOptions {
  /** Every comm action takes no time (the step with free communication). */
  readonly freeComm?: boolean;
}

export function runPrograms(programs: readonly Program[], rendezvous: readonly Rendezvous[], options: EngineOptions = {}): EngineRun {
  const runs = programs.map((p) => ({
    start: new Float64Array(p.actions.length).fill(NaN),
    end: new Float64Array(p.actions.length).fill(NaN),
    segStart: p.actions.map((a) => new Float64Array(a.seconds.length).fill(NaN)),
    segEnd: p.actions.map((a) => new Float64Array(a.seconds.length).fill(NaN)),
  }));
  const commPos = programs.map((p) => {
    const pos = new Int32Array(p.actions.length).fill(-1);
    p.comm.forEach((id, i) => (pos[id] = i));
    return pos;
  });
  const head = programs.map(() => [0, 0]);
  const free = programs.map(() => [0, 0]);
  const seg = programs.map(() => 0);
  const seconds = (a: ProgAction, s: number): number => (options.freeComm && a.stream === "comm" ? 0 : a.seconds[s]!);

  /** When the action's deps and partial points are all met, or NaN while some are not. */
  const ready = (p: number, a: ProgAction): number => {
    const r = runs[p]!;
    let t = 0;
    for (const d of a.deps) {
      const e = r.end[d]!;
      if (Number.isNaN(e)) return NaN;
      t = Math.max(t, e);
    }
    for (const [d, layer] of a.partial) {
      const dep = programs[p]!.actions[d]!;
      const e = r.segEnd[d]![dep.layers.indexOf(layer)]!;
      if (Number.isNaN(e)) return NaN;
      t = Math.max(t, e);
    }
    return t;
  };

  const stepCompute = (p: number): boolean => {
    const prog = programs[p]!;
    const id = prog.compute[head[p]![0]!];
    if (id === undefined) return false;
    const a = prog.actions[id]!;
    const r = runs[p]!;
    const s = seg[p]!;
    let t = free[p]![0]!;
    if (s === 0) {
      const at = ready(p, a);
      if (Number.isNaN(at)) return false;
      t = Math.max(t, at);
    }
    const layer = a.layers[s];
    for (const [l, g] of a.gates) {
      if (l !== layer) continue;
      const e = r.end[g]!;
      if (Number.isNaN(e)) return false;
      t = Math.max(t, e);
    }
    if (s === 0) r.start[id] = t;
    r.segStart[id]![s] = t;
    const done = t + seconds(a, s);
    r.segEnd[id]![s] = done;
    free[p]![0] = done;
    if (s + 1 < a.seconds.length) seg[p] = s + 1;
    else {
      seg[p] = 0;
      r.end[id] = done;
      head[p]![0]!++;
    }
    return true;
  };

  const finishComm = (p: number, id: number, t0: number, t1: number): void => {
    const r = runs[p]!;
    r.start[id] = t0;
    r.end[id] = t1;
    r.segStart[id]![0] = t0;
    r.segEnd[id]![0] = t1;
    free[p]![1] = t1;
    head[p]![1]!++;
  };

  const stepComm = (p: number): boolean => {
    const prog = programs[p]!;
    const id = prog.comm[head[p]![1]!];
    if (id === undefined) return false;
    const a = prog.actions[id]!;
    if (a.rendezvous < 0) {
      const at = ready(p, a);
      if (Number.isNaN(at)) return false;
      const t = Math.max(at, free[p]![1]!);
      finishComm(p, id, t, t + seconds(a, 0));
      return true;
    }
    const members = rendezvous[a.rendezvous]!.members;
    let t = 0;
    let duration = 0;
    for (const m of members) {
      if (head[m.program]![1] !== commPos[m.program]![m.action]) return false;
      const ma = programs[m.program]!.actions[m.action]!;
      const at = ready(m.program, ma);
      if (Number.isNaN(at)) return false;
      t = Math.max(t, at, free[m.program]![1]!);
      duration = Math.max(duration, seconds(ma, 0));
    }
    for (const m of members) finishComm(m.program, m.action, t, t + duration);
    return true;
  };

  let progress = true;
  while (progress) {
    progress = false;
    for (let p = 0; p < programs.length; p++) {
      while (stepCompute(p)) progress = true;
      while (stepComm(p)) progress = true;
    }
  }

  const stuck: string[] = [];
  let makespan = 0;
  const out = programs.map((prog, p): ProgramRun => {
    const r = runs[p]!;
    for (const [k, list] of [prog.compute, prog.comm].entries()) {
      const h = head[p]![k]!;
      if (h < list.length) stuck.push(`program ${p} ${k === 0 ? "compute" : "comm"}: ${formatAction(prog.actions[list[h]!]!.action)}`);
    }
    let busy = 0;
    for (const id of prog.compute) {
      const a = prog.actions[id]!;
      for (let s = 0; s < a.seconds.length; s++) busy += seconds(a, s);
      if (!Number.isNaN(r.end[id]!)) makespan = Math.max(makespan, r.end[id]!);
    }
    for (const id of prog.comm) if (!Number.isNaN(r.end[id]!)) makespan = Math.max(makespan, r.end[id]!);
    return { ...r, computeBusy: busy };
  });
  return { programs: out, complete: stuck.length === 0, makespan, stuck };
}
