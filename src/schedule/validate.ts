// Validation of a lowered schedule before anything is emitted: structure, data flow, pairing, no deadlock.
import { ActionIndex } from "./action-index.js";
import { actionShapeError, formatAction, isComputeKind, isP2PKind, isShardKind, type ComputeKind } from "./action.js";
import { SOLO } from "./collectives.js";
import { execute, type Blocked, type Execution } from "./execute.js";
import { actionLabel, type LoweredSchedule } from "./lowered.js";
import { renderPicture } from "./picture.js";
import { counterpart, localInputs, refText } from "./rules.js";
import { groupWait, ShardChecks, strayGroupFields } from "./validate-shard.js";

export type ProblemCode =
  | "shape" // counts, placement table, stream table, ids
  | "malformed" // an action's own fields
  | "range" // stage, micro-batch or peer outside the pipeline
  | "placement" // an action on a rank that does not run its stage, or talking to the wrong peer
  | "stream" // compute or OPTIMIZER on the comm stream, p2p or a collective on the compute stream
  | "duplicate"
  | "missing" // a (stage, micro-batch) without its forward or backward
  | "order" // backward before forward, R outside F..B, W before I, collectives in another order on one member, OPTIMIZER too early
  | "unmatched" // a SEND without its RECV or the reverse, a collective that a member of its group never enters
  | "collective" // members of one collective that disagree on bytes or group size
  | "dependency" // a data dependency without its edge, an edge to nothing, a FREE without its ALL_GATHER
  | "deadlock";

export interface Problem {
  readonly code: ProblemCode;
  /** Starts with where: `rank 1, step 4: …` (step from a unit-time run of the schedule). */
  readonly message: string;
  readonly rank?: number;
  readonly step?: number;
  /** The offending actions, marked in the picture. */
  readonly ids: readonly number[];
}

export interface Validation {
  readonly ok: boolean;
  readonly problems: readonly Problem[];
  /** Rank × step picture around the first problem; empty when ok. */
  readonly picture: string;
}

export function validate(s: LoweredSchedule): Validation {
  const structural = checkShape(s);
  if (structural.length > 0) return { ok: false, problems: structural, picture: "" };
  const run = execute(s, () => 1);
  const problems = new Checker(s, run).check();
  if (problems.length === 0) return { ok: true, problems, picture: "" };
  const marks = new Set(problems.flatMap((p) => p.ids));
  return { ok: false, problems, picture: renderPicture(s, run, { marks }) };
}

/** Throws with every problem and the picture; for the planner, which only emits validated schedules. */
export function assertValid(s: LoweredSchedule): void {
  const v = validate(s);
  if (v.ok) return;
  throw new Error(`schedule ${s.name} is invalid:\n${v.problems.map((p) => `  ${p.message}`).join("\n")}\n${v.picture}`);
}

/** What the engine itself relies on: sane counts, dense ids, every stream entry a real action, once. */
function checkShape(s: LoweredSchedule): Problem[] {
  const out: Problem[] = [];
  const bad = (message: string): void => void out.push({ code: "shape", message, ids: [] });
  const count = (name: string, n: number): void => {
    if (!Number.isSafeInteger(n) || n < 1) bad(`${name} must be a positive integer, got ${n}`);
  };
  count("ranks", s.ranks);
  count("stages", s.stages);
  count("microBatches", s.microBatches);
  if (out.length > 0) return out;
  if (s.stageRank.length !== s.stages) bad(`placement lists ${s.stageRank.length} stages, expected ${s.stages}`);
  s.stageRank.forEach((r, k) => {
    if (!Number.isSafeInteger(r) || r < 0 || r >= s.ranks) bad(`stage ${k} is placed on rank ${r}, outside 0..${s.ranks - 1}`);
  });
  if (s.streams.length !== s.ranks) bad(`${s.streams.length} stream tables for ${s.ranks} ranks`);
  s.actions.forEach((a, i) => {
    if (a.id !== i) bad(`action at index ${i} has id ${a.id} (ids must equal their index)`);
  });
  // Which stream (2·rank, +1 for comm) first listed each id; messages are built only for a problem.
  const seen = new Int32Array(s.actions.length).fill(-1);
  const name = (si: number): string => `rank ${si >> 1} ${si % 2 === 0 ? "compute" : "comm"} stream`;
  s.streams.forEach((st, rank) => {
    [st.compute, st.comm].forEach((ids, k) => {
      const si = 2 * rank + k;
      for (const id of ids) {
        if (!Number.isSafeInteger(id) || id < 0 || id >= s.actions.length) bad(`${name(si)} lists action #${id}, which does not exist`);
        else if (seen[id] !== -1) bad(`${actionLabel(s, id)} is listed twice (${name(seen[id]!)} and ${name(si)})`);
        else seen[id] = si;
      }
    });
  });
  return out;
}

class Checker {
  private readonly out: Problem[] = [];
  /** Compute and p2p actions inside the pipeline, first occurrence per rank. */
  private readonly index: ActionIndex;
  /** Position of an action in its stream, -1 when it is in none; and which stream (2·rank, +1 for comm). */
  private readonly position: Int32Array;
  private readonly listedIn: Int32Array;
  private readonly stuck: Map<number, Blocked>;
  private readonly shard: ShardChecks;

  constructor(
    private readonly s: LoweredSchedule,
    private readonly run: Execution,
  ) {
    this.index = new ActionIndex(s);
    this.position = new Int32Array(s.actions.length).fill(-1);
    this.listedIn = new Int32Array(s.actions.length).fill(-1);
    s.streams.forEach((st, rank) => {
      st.compute.forEach((id, i) => ((this.position[id] = i), (this.listedIn[id] = 2 * rank)));
      st.comm.forEach((id, i) => ((this.position[id] = i), (this.listedIn[id] = 2 * rank + 1)));
    });
    this.stuck = new Map(run.blocked.map((b) => [b.id, b]));
    const at = { position: this.position, listedIn: this.listedIn };
    this.shard = new ShardChecks(s, at, run.collectives, (code, ids, what, rank) => this.report(code, ids, what, rank));
  }

  check(): Problem[] {
    this.checkActions();
    this.shard.checkRelations();
    this.checkStages();
    this.checkDeadlock();
    return this.out;
  }

  private step(id: number): number | undefined {
    const t = this.run.start[id]!;
    return Number.isNaN(t) ? this.stuck.get(id)?.since : t;
  }

  private report(code: ProblemCode, ids: number[], what: string, rank?: number): void {
    const first = ids[0];
    const r = rank ?? (first === undefined ? undefined : this.s.actions[first]?.rank);
    const step = first === undefined ? undefined : this.step(first);
    const when = first === undefined ? "" : step === undefined ? ", never reached" : `, step ${step}`;
    const where = r === undefined ? "" : `rank ${r}${when}: `;
    const p: Problem = { code, message: `${where}${what}`, ids };
    this.out.push({ ...p, ...(r === undefined ? {} : { rank: r }), ...(step === undefined ? {} : { step }) });
  }

  private checkActions(): void {
    const { s } = this;
    // Index first: pairing and dependency checks look actions up on other ranks.
    for (const a of s.actions) {
      if (actionShapeError(a.action) !== undefined || !(a.rank >= 0 && a.rank < s.ranks)) continue;
      const first = this.index.findAction(a.rank, a.action);
      if (first !== undefined) this.report("duplicate", [a.id, first], `${formatAction(a.action)} appears twice on rank ${a.rank}`);
      else this.index.add(a.rank, a.action, a.id);
    }
    for (const a of s.actions) this.checkAction(a.id);
  }

  /** Messages name actions by text; built only when something is wrong (this runs on every action). */
  private checkAction(id: number): void {
    const { s } = this;
    const a = s.actions[id]!;
    const text = (): string => formatAction(a.action);
    const err = actionShapeError(a.action);
    if (err) return this.report("malformed", [id], `${text()}: ${err}`);
    if (!(a.rank >= 0 && a.rank < s.ranks)) return this.report("range", [id], `${text()} claims rank ${a.rank}, outside 0..${s.ranks - 1}`, 0);
    if (this.position[id] === -1) this.report("missing", [id], `${text()} is in no stream of rank ${a.rank}`);
    else if (this.listedIn[id] !== 2 * a.rank + (a.stream === "comm" ? 1 : 0)) {
      this.report("stream", [id], `${text()} says rank ${a.rank} ${a.stream} stream but is listed elsewhere`);
    }
    for (const d of a.deps) {
      if (!(Number.isSafeInteger(d) && d >= 0 && d < s.actions.length) || d === id) this.report("dependency", [id], `${text()} depends on action #${d}, which is not another action`);
    }
    if (isShardKind(a.action.kind)) return this.shard.checkAction(id);
    if (strayGroupFields(a)) this.report("malformed", [id], `${text()} takes no group, groupSize or bytes (only collectives do)`);
    const wantStream = isComputeKind(a.action.kind) ? "compute" : "comm";
    if (a.stream !== wantStream) this.report("stream", [id], `${text()} belongs on the ${wantStream} stream, not ${a.stream}`);
    const { stage, mb, peer } = a.action;
    if (stage >= s.stages || mb! >= s.microBatches || (peer !== undefined && peer >= s.ranks)) {
      return this.report("range", [id], `${text()} is outside the pipeline (${s.stages} stages, ${s.microBatches} micro-batches, ${s.ranks} ranks)`);
    }
    if (s.stageRank[stage] !== a.rank) this.report("placement", [id], `${text()}: stage ${stage} runs on rank ${s.stageRank[stage]}, not here`);
    if (isP2PKind(a.action.kind)) this.checkPair(id);
    this.checkInputs(id);
  }

  private checkPair(id: number): void {
    const { s } = this;
    const a = s.actions[id]!;
    const text = (): string => formatAction(a.action);
    const other = counterpart(a.action, a.rank);
    const neighbour = a.action.kind === "SEND_F" || a.action.kind === "RECV_B" ? a.action.stage + 1 : a.action.stage - 1;
    if (!other || neighbour < 0 || neighbour >= s.stages) {
      return this.report("placement", [id], `${text()}: stage ${a.action.stage} has no neighbour stage ${neighbour} to talk to`);
    }
    const want = s.stageRank[neighbour]!;
    if (a.action.peer !== want) return this.report("placement", [id], `${text()}: stage ${neighbour} runs on rank ${want}, not rank ${a.action.peer}`);
    if (want === a.rank) return this.report("placement", [id], `${text()}: stage ${neighbour} is on the same rank, so nothing needs to move`);
    const m = this.index.findRef(other);
    if (m === undefined) this.report("unmatched", [id], `${text()} has no matching ${refText(other)} on rank ${other.rank}`);
    else if (a.match !== m || s.actions[m]!.match !== id) this.report("unmatched", [id, m], `${text()} and ${actionLabel(s, m)} are not paired with each other`);
  }

  /** The data-flow edges rules.ts requires must be present. */
  private checkInputs(id: number): void {
    const a = this.s.actions[id]!;
    for (const need of localInputs(a.action, a.rank, this.s, this.index.has)) {
      const d = this.index.findRef(need);
      // A missing compute action is reported once per (stage, micro-batch) by checkStages.
      if (d === undefined) {
        if (isP2PKind(need.kind)) this.report("dependency", [id], `${formatAction(a.action)} needs ${refText(need)}, which rank ${a.rank} does not have`);
      } else if (!a.deps.includes(d)) this.report("dependency", [id, d], `${formatAction(a.action)} does not depend on ${refText(need)}`);
    }
  }

  /** Every (stage, micro-batch) has its forward and backward once, in order, on the rank of its stage. */
  private checkStages(): void {
    const { s } = this;
    const pos = (id: number | undefined): number => (id === undefined ? -1 : this.position[id]!);
    for (let stage = 0; stage < s.stages; stage++) {
      const rank = s.stageRank[stage]!;
      for (let mb = 0; mb < s.microBatches; mb++) {
        const at = (kind: ComputeKind): number | undefined => this.index.find(rank, kind, stage, mb);
        const [f, b, i, w, r] = [at("F"), at("B"), at("I"), at("W"), at("R")];
        const name = `stage ${stage} micro-batch ${mb}`;
        if (f === undefined) this.report("missing", [], `${name} has no forward ${stage}F${mb}`, rank);
        if (b !== undefined && (i !== undefined || w !== undefined)) this.report("duplicate", [b, ...[i, w].filter((x) => x !== undefined)], `${name} has both a full backward and a split one`);
        else if (b === undefined && i === undefined && w === undefined) this.report("missing", [], `${name} has no backward (${stage}B${mb}, or ${stage}I${mb} and ${stage}W${mb})`, rank);
        else if ((i === undefined) !== (w === undefined)) this.report("missing", [(i ?? w)!], `${name} has ${i === undefined ? "W without I" : "I without W"}`);
        const back = b ?? i;
        if (f !== undefined && back !== undefined && pos(back) < pos(f)) this.report("order", [back, f], `${actionLabel(s, back)} comes before its forward ${stage}F${mb}`);
        if (i !== undefined && w !== undefined && pos(w) < pos(i)) this.report("order", [w, i], `${actionLabel(s, w)} comes before its ${stage}I${mb}`);
        if (r !== undefined && (f === undefined || back === undefined || !(pos(f) < pos(r) && pos(r) < pos(back)))) {
          this.report("order", [r], `${actionLabel(s, r)} must sit between ${stage}F${mb} and its backward`);
        }
      }
    }
  }

  /**
   * Each stuck stream waits on exactly one thing first: a dependency (whose stream is stuck too), its p2p
   * partner (likewise), or something that will never exist. Following those waits from every stuck stream
   * ends either in a cycle or at such a root, and only those are reported and marked; the other stuck
   * streams are their consequences and show in the picture with a `!`.
   */
  private checkDeadlock(): void {
    const { s, run } = this;
    if (run.complete) return;
    const never = s.actions.length - run.end.filter((t) => !Number.isNaN(t)).length;
    const tail = ` (${never} of ${s.actions.length} actions never run)`;
    const streamKey = (rank: number, stream: string): string => `${rank}:${stream}`;
    const byStream = new Map(run.blocked.map((b) => [streamKey(b.rank, b.stream), b] as const));
    const next = (b: Blocked): Blocked | undefined => {
      const target = b.waitsOn.length > 0 ? b.waitsOn[0]! : b.partner?.kind === "not-ready" ? b.partner.id : undefined;
      const t = target === undefined ? undefined : s.actions[target];
      if (!t || this.position[t.id] === -1 || (t.rank === b.rank && t.stream === b.stream)) return undefined;
      return byStream.get(streamKey(t.rank, t.stream));
    };
    const reported = new Set<Blocked>();
    const byStuck = (x: Blocked, y: Blocked): number =>
      x.since - y.since || x.rank - y.rank || (x.stream === "compute" ? 0 : 1) - (y.stream === "compute" ? 0 : 1);
    const ordered = [...run.blocked].sort(byStuck);
    for (const first of ordered) {
      const path: Blocked[] = [];
      let b: Blocked | undefined = first;
      while (b && !path.includes(b) && !reported.has(b)) {
        path.push(b);
        b = next(b);
      }
      for (const p of path) reported.add(p);
      if (b && reported.has(b) && !path.includes(b)) continue; // joins a chain already reported
      if (b === undefined) {
        const root = path[path.length - 1]!;
        this.report("deadlock", [root.id], `${root.stream} stream stuck at ${formatAction(s.actions[root.id]!.action)}: ${this.why(root)}${tail}`);
      } else {
        // Start the cycle at its earliest-stuck stream so that the message does not depend on where we came in.
        const loop = path.slice(path.indexOf(b));
        const first = loop.reduce((best, c, i) => (byStuck(c, loop[best]!) < 0 ? i : best), 0);
        const cycle = [...loop.slice(first), ...loop.slice(0, first)];
        const steps = cycle.map((c) => `rank ${c.rank} ${c.stream} ${formatAction(s.actions[c.id]!.action)} ${this.why(c)}`);
        this.report("deadlock", cycle.map((c) => c.id), `wait cycle: ${steps.join("; ")}${tail}`);
      }
    }
  }

  private why(b: Blocked): string {
    const { s } = this;
    const a = s.actions[b.id]!;
    if (b.waitsOn.length > 0) return `waits for ${b.waitsOn.map((d) => this.explainPending(d, b)).join(", ")}`;
    const k = this.run.collectives?.setOf[b.id];
    const group = k !== undefined && k !== SOLO;
    if (b.partner?.kind === "not-ready") {
      return `waits for its ${group ? "group member" : "partner"} ${actionLabel(s, b.partner.id)}, ${this.explainPartner(b.partner.id)}`;
    }
    const absent = groupWait(s, this.run.collectives, b.id);
    if (absent !== undefined) return absent;
    const other = counterpart(a.action, a.rank);
    return other ? `waits for a ${refText(other)} that rank ${other.rank} never posts` : "has no partner";
  }

  private explainPending(d: number, b: Blocked): string {
    const { s } = this;
    if (!(d >= 0 && d < s.actions.length)) return `action #${d}, which does not exist`;
    const dep = s.actions[d]!;
    if (this.position[d] === -1) return `${actionLabel(s, d)}, which is in no stream`;
    if (dep.rank === b.rank && dep.stream === b.stream) return `${formatAction(dep.action)}, which comes later in the same stream`;
    return `${actionLabel(s, d)}${this.behind(d)}`;
  }

  private explainPartner(m: number): string {
    const why = this.behind(m);
    return why === "" ? "whose own dependencies never finish" : why.slice(2);
  }

  /** `, which sits behind X in its comm stream` when an earlier action of its stream never finishes. */
  private behind(id: number): string {
    const { s } = this;
    const a = s.actions[id]!;
    const list = s.streams[a.rank]![a.stream];
    const ahead = list.slice(0, this.position[id]!).find((x) => Number.isNaN(this.run.end[x]!));
    return ahead === undefined ? "" : `, which sits behind ${formatAction(s.actions[ahead]!.action)} in its ${a.stream} stream`;
  }
}
