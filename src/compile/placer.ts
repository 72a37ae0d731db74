// Shared by the steps that add collectives to programs: where compute actions of each stage sit, timings of
// points in the reference run, and the new comm actions waiting to be merged into the comm streams.
import type { EngineRun } from "./engine.js";
import { newAction, segmentOf, type ProgAction, type Program, type Rendezvous } from "./program.js";

/** Compute actions of one stage on its program, by kind, in compute-stream order. */
export interface StageOccurrences {
  readonly F: number[];
  readonly R: number[];
  readonly B: number[];
  readonly I: number[];
  readonly W: number[];
  /** F and R merged in stream order; B|I and B|W likewise. */
  readonly forwardLike: number[];
  readonly backwardLike: number[];
  readonly weightLike: number[];
  optimizer: number;
}

interface Pending {
  readonly program: number;
  readonly id: number;
  key: number;
  /** At equal keys: p2p (0) first, then deadlines (1: something waits for them), then the rest (2). */
  readonly cls: number;
  seq: number;
}

export class Placer {
  /** Per program: compute-stream position of each compute action. */
  private readonly position: Int32Array[];
  readonly occurrences = new Map<number, StageOccurrences>();
  private readonly pending: Pending[] = [];
  private readonly pendingAt = new Map<string, Pending>();
  private seq = 0;

  constructor(
    readonly programs: Program[],
    readonly rendezvous: Rendezvous[],
    readonly reference: EngineRun,
  ) {
    this.position = programs.map((p) => {
      const pos = new Int32Array(p.actions.length).fill(-1);
      p.compute.forEach((id, i) => (pos[id] = i));
      return pos;
    });
    programs.forEach((p) => {
      for (const id of p.compute) {
        const { kind, stage } = p.actions[id]!.action;
        let occ = this.occurrences.get(stage);
        if (!occ) {
          occ = { F: [], R: [], B: [], I: [], W: [], forwardLike: [], backwardLike: [], weightLike: [], optimizer: -1 };
          this.occurrences.set(stage, occ);
        }
        if (kind === "OPTIMIZER") occ.optimizer = id;
        else if (kind === "F" || kind === "R" || kind === "B" || kind === "I" || kind === "W") occ[kind].push(id);
        if (kind === "F" || kind === "R") occ.forwardLike.push(id);
        if (kind === "B" || kind === "I") occ.backwardLike.push(id);
        if (kind === "B" || kind === "W") occ.weightLike.push(id);
      }
    });
  }

  stage(stage: number): StageOccurrences {
    const o = this.occurrences.get(stage);
    if (!o) throw new Error(`internal: stage ${stage} has no compute actions`);
    return o;
  }

  action(program: number, id: number): ProgAction {
    return this.programs[program]!.actions[id]!;
  }

  computePosition(program: number, id: number): number {
    return this.position[program]![id]!;
  }

  /** Reference-run end of a compute action's layer, or of the whole action. */
  endOf(program: number, id: number, layer?: number): number {
    const run = this.reference.programs[program]!;
    return layer === undefined ? run.end[id]! : run.segEnd[id]![segmentOf(this.action(program, id), layer)]!;
  }

  /** The compute action right before `id` on its stream, if any. */
  previousCompute(program: number, id: number): number | undefined {
    const pos = this.position[program]![id]!;
    return pos > 0 ? this.programs[program]!.compute[pos - 1] : undefined;
  }

  /** A new comm action on one program, merged into its comm stream by (key, cls) in `finish`. */
  add(program: number, fields: Parameters<typeof newAction>[0], key: number, cls: 1 | 2): number {
    return this.addWithSeq(program, fields, key, cls, this.seq++);
  }

  /** One comm action per member program, starting together; all members share one key and sequence
   *  number, so every program orders the group alike relative to other groups. */
  addGroup(members: { program: number; fields: Parameters<typeof newAction>[0] }[], key: number, cls: 1 | 2): number[] {
    const group = this.rendezvous.length;
    const seq = this.seq++;
    const ids = members.map((m) => this.addWithSeq(m.program, { ...m.fields, rendezvous: group }, key, cls, seq));
    this.rendezvous.push({ members: members.map((m, i) => ({ program: m.program, action: ids[i]! })) });
    return ids;
  }

  private addWithSeq(program: number, fields: Parameters<typeof newAction>[0], key: number, cls: number, seq: number): number {
    const prog = this.programs[program]!;
    const id = prog.actions.length;
    prog.actions.push(newAction({ ...fields, stream: "comm" }));
    const item = { program, id, key, cls, seq };
    this.pending.push(item);
    this.pendingAt.set(`${program}:${id}`, item);
    return id;
  }

  /** Moves a new action to (at least) `key` and behind everything added so far with that key: for an action
   *  that must follow one added later (a reduction that waits for a tied all-reduce). */
  rekey(program: number, id: number, key: number): void {
    const p = this.pendingAt.get(`${program}:${id}`);
    if (!p) throw new Error(`internal: action ${id} of program ${program} was not added by the placer`);
    p.key = Math.max(p.key, key);
    p.seq = this.seq++;
  }

  /** Sort key of a pending action (for "the last one in stream order"). */
  orderOf(program: number, id: number): readonly [number, number, number] {
    const p = this.pendingAt.get(`${program}:${id}`);
    if (!p) throw new Error(`internal: action ${id} of program ${program} was not added by the placer`);
    return [p.key, p.cls, p.seq];
  }

  /**
   * Merges the new actions into the comm streams. The existing (p2p) actions keep their order and are keyed
   * by their reference start; new ones by when they became ready in the reference run. One key order for
   * every program keeps rendezvous consistent: no two programs see two groups in opposite orders.
   *
   * One comm stream runs one action at a time, so a gradient collective queued before a pipeline transfer
   * holds up the transfer and, through it, the next stage. A once-per-step collective of the program's own
   * replicas (no rendezvous, nothing waits for it but the optimizer step: DDP/OSS bucket all-reduces) that
   * would still be running when the next transfer is due in the reference run goes behind that transfer
   * instead; it moves only past SEND/RECV actions, which never wait for it, and everything else waits for
   * the postponed ones first.
   */
  finish(): void {
    this.programs.forEach((prog, p) => {
      const run = this.reference.programs[p]!;
      const items: Pending[] = prog.comm.map((id, i) => ({ program: p, id, key: run.start[id]!, cls: 0, seq: -prog.comm.length + i }));
      for (const x of this.pending) if (x.program === p) items.push(x);
      items.sort((a, b) => a.key - b.key || a.cls - b.cls || a.seq - b.seq);
      // Only once-per-step collectives move: a per-micro-batch one (a reduce-scatter, a reduce) holds its
      // gradient buffer until it runs, and moving each behind the next transfer would pile them up.
      const local = (x: Pending) => x.cls === 2 && prog.actions[x.id]!.rendezvous < 0 && prog.actions[x.id]!.action.mb === undefined;
      const seconds = (x: Pending) => prog.actions[x.id]!.seconds[0]!;
      // Key of the next transfer after each position (Infinity when none follows).
      const nextTransfer = new Float64Array(items.length + 1).fill(Infinity);
      for (let i = items.length - 1; i >= 0; i--) nextTransfer[i] = items[i + 1]?.cls === 0 ? items[i + 1]!.key : nextTransfer[i + 1]!;
      const out: number[] = [];
      const postponed: Pending[] = [];
      let free = 0;
      const emit = (x: Pending) => {
        out.push(x.id);
        free = Math.max(free, x.key) + seconds(x);
      };
      const flush = () => postponed.splice(0).forEach(emit);
      items.forEach((x, i) => {
        if (x.cls !== 0) {
          if (!local(x)) flush();
          if (!local(x) || postponed.length === 0) {
            if (!local(x) || Math.max(free, x.key) + seconds(x) <= nextTransfer[i]!) return emit(x);
          }
          postponed.push(x);
          return;
        }
        // A transfer: the postponed collectives that still end in time go first, the rest wait behind it.
        while (postponed.length > 0 && Math.max(free, postponed[0]!.key) + seconds(postponed[0]!) <= x.key) emit(postponed.shift()!);
        emit(x);
      });
      flush();
      prog.comm = out;
    });
  }
}

/** Compares two orderOf results. */
export function compareOrder(a: readonly [number, number, number], b: readonly [number, number, number]): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}
