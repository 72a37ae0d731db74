// Validation of shard actions: collectives' groups and order, FREE's gather, OPTIMIZER after its backwards.
import { formatAction, isCollectiveKind, type Action } from "./action.js";
import { collectiveKey, freedGathers, groupError, SOLO, type CollectiveMatching } from "./collectives.js";
import { actionLabel, type LoweredAction, type LoweredSchedule } from "./lowered.js";
import type { ProblemCode } from "./validate.js";

export type Report = (code: ProblemCode, ids: number[], what: string, rank?: number) => void;

/** Where validate.ts has put each action: its position in its stream and the stream (2·rank, +1 for comm). */
export interface Positions {
  readonly position: Int32Array;
  readonly listedIn: Int32Array;
}

const REDUCTIONS: ReadonlySet<string> = new Set(["REDUCE_SCATTER", "ALL_REDUCE", "REDUCE"]);

/** `the 2nd`: occurrences in messages. */
function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
  return `${n}${suffix}`;
}

/** Only collectives carry a group, its size and bytes; whether `a` carries one it should not. */
export function strayGroupFields(a: LoweredAction): boolean {
  return a.group !== undefined || a.groupSize !== undefined || a.bytes !== undefined;
}

export class ShardChecks {
  /** Collected by checkAction, so that the relation checks need no pass over every action. */
  private readonly frees: LoweredAction[] = [];
  private readonly optimizers: LoweredAction[] = [];

  constructor(
    private readonly s: LoweredSchedule,
    private readonly at: Positions,
    private readonly matching: CollectiveMatching | undefined,
    private readonly report: Report,
  ) {}

  /** One shard action's own fields, stream and placement (validate.ts has checked its deps). */
  checkAction(id: number): void {
    const { s, report } = this;
    const a = s.actions[id]!;
    const { kind, stage, mb, peer } = a.action;
    const text = formatAction(a.action);
    if (kind === "FREE") this.frees.push(a);
    if (kind === "OPTIMIZER") this.optimizers.push(a);
    const collective = isCollectiveKind(kind);
    if (collective && a.stream !== "comm") report("stream", [id], `${text} belongs on the comm stream, not ${a.stream}`);
    if (kind === "OPTIMIZER" && a.stream !== "compute") report("stream", [id], `${text} belongs on the compute stream, not ${a.stream}`);
    if (stage >= s.stages || (mb !== undefined && mb >= s.microBatches)) {
      return report("range", [id], `${text} is outside the pipeline (${s.stages} stages, ${s.microBatches} micro-batches)`);
    }
    if (s.stageRank[stage] !== a.rank) report("placement", [id], `${text}: stage ${stage} runs on rank ${s.stageRank[stage]}, not here`);
    if (!collective) {
      if (strayGroupFields(a)) report("malformed", [id], `${text} takes no group, groupSize or bytes (only collectives do)`);
      return;
    }
    const err = groupError(s, a);
    if (err) report("malformed", [id], `${text} ${err}`);
    if (a.bytes === undefined) report("malformed", [id], `${text} needs its bytes`);
    else if (!(Number.isFinite(a.bytes) && a.bytes >= 0)) report("malformed", [id], `${text} has bytes ${a.bytes}, not a size`);
    const size = a.groupSize;
    if (size !== undefined && !(Number.isSafeInteger(size) && size >= (a.group?.length ?? 1))) {
      report("malformed", [id], `${text} has groupSize ${size}, not a count of at least its group's ${a.group?.length ?? 1} ranks`);
    }
    // With a group of one, the root is a replica outside the simulation: a rank of another numbering.
    if (!err && a.group!.length > 1 && peer !== undefined && !a.group!.includes(peer)) {
      report("placement", [id], `${text}: root rank ${peer} is not in its group [${a.group!.join(",")}]`);
    }
  }

  /** Everything that relates shard actions to each other; after checkAction has seen every shard action. */
  checkRelations(): void {
    this.checkGroups();
    this.checkFrees();
    this.checkOptimizers();
  }

  /** Every member enters each collective of its group, with the same bytes and size, in the same order. */
  private checkGroups(): void {
    const { s, report, matching } = this;
    if (!matching) return;
    const complete = matching.sets.map((set) => !set.includes(-1));
    matching.sets.forEach((set, k) => {
      const present = [...set].filter((id) => id !== -1);
      const first = s.actions[present[0]!]!;
      const group = first.group!;
      const key = matching.keys[k]!;
      if (!complete[k]) {
        const absent = group.filter((_, i) => set[i] === -1);
        const nth = `the ${ordinal(matching.occurrence[k]! + 1)} ${key}`;
        report("unmatched", present, `${formatAction(first.action)} (${nth} on rank ${first.rank}) is never entered by rank ${absent.join(", rank ")} of its group`);
        return;
      }
      for (const id of present.slice(1)) {
        const a = s.actions[id]!;
        for (const field of ["bytes", "groupSize"] as const) {
          if (a[field] !== first[field]) {
            report("collective", [present[0]!, id], `${formatAction(first.action)} and ${actionLabel(s, id)} (${key}) disagree on ${field}: ${first[field]} vs ${a[field]}`);
          }
        }
      }
    });
    // Per group (by its ranks), each member's complete collectives in stream order.
    const orders = new Map<string, Map<number, number[]>>();
    s.streams.forEach((st, rank) => {
      for (const id of [...st.comm, ...st.compute]) {
        const k = matching.setOf[id]!;
        if (k < 0 || !complete[k]) continue;
        const g = s.actions[id]!.group!.join(",");
        let byRank = orders.get(g);
        if (!byRank) orders.set(g, (byRank = new Map()));
        let list = byRank.get(rank);
        if (!list) byRank.set(rank, (list = []));
        list.push(k);
      }
    });
    for (const [g, byRank] of orders) {
      const [[r0, ref], ...others] = [...byRank];
      for (const [r, list] of others) {
        const i = list.findIndex((k, j) => k !== ref![j]);
        if (i === -1) continue;
        const mine = matching.sets[list[i]!]!.find((id) => s.actions[id]!.rank === r)!;
        const theirs = matching.sets[ref![i]!]!.find((id) => s.actions[id]!.rank === r0)!;
        report(
          "order",
          [mine, theirs],
          `rank ${r} enters the collectives of group [${g}] in another order than rank ${r0}: its ${ordinal(i + 1)} is ` +
            `${formatAction(s.actions[mine]!.action)} where rank ${r0}'s is ${formatAction(s.actions[theirs]!.action)}`,
        );
      }
    }
  }

  /** A FREE depends on exactly one ALL_GATHER of its stage and unit, and no gather is freed twice. */
  private checkFrees(): void {
    const { s, report } = this;
    const freedBy = new Map<number, number>();
    for (const a of this.frees) {
      const gathers = freedGathers(s, a);
      const unit = a.action.unit === undefined ? "" : `u${a.action.unit}`;
      if (gathers.length !== 1) {
        const what = gathers.length === 0 ? "does not depend on" : `depends on ${gathers.length} of`;
        report("dependency", [a.id, ...gathers], `${formatAction(a.action)} ${what} the ${a.action.stage}ALL_GATHER…${unit} on rank ${a.rank} it frees (exactly one)`);
        continue;
      }
      const g = gathers[0]!;
      const other = freedBy.get(g);
      if (other === undefined) freedBy.set(g, a.id);
      else report("duplicate", [a.id, other, g], `${formatAction(a.action)} frees ${formatAction(s.actions[g]!.action)}, which ${formatAction(s.actions[other]!.action)} already frees`);
    }
  }

  /**
   * An OPTIMIZER comes after every backward (B, I, W) of its stage on the compute stream, once per rank and
   * text, and waits for every reduction (REDUCE_SCATTER, ALL_REDUCE, REDUCE) of its stage on its rank: it,
   * or an action before it on its compute stream, depends on that reduction or on a later action of the comm
   * stream (which runs in order). A chain through other ranks is not followed; the plan needs none.
   */
  private checkOptimizers(): void {
    const { s, report } = this;
    const { position, listedIn } = this.at;
    const byRank = new Map<number, LoweredAction[]>();
    for (const a of this.optimizers) {
      if (listedIn[a.id] !== 2 * a.rank || a.action.stage >= s.stages) continue;
      const list = byRank.get(a.rank) ?? [];
      byRank.set(a.rank, list);
      const twin = list.find((o) => sameAction(o.action, a.action));
      if (twin) report("duplicate", [a.id, twin.id], `${formatAction(a.action)} appears twice on rank ${a.rank}`);
      list.push(a);
    }
    for (const [rank, optimizers] of byRank) {
      const compute = s.streams[rank]!.compute;
      const comm = s.streams[rank]!.comm;
      // Covered comm position before each compute position: how far into the comm stream is known done.
      const covered = new Int32Array(compute.length);
      let upTo = -1;
      compute.forEach((id, i) => {
        for (const d of s.actions[id]!.deps) if (listedIn[d] === 2 * rank + 1) upTo = Math.max(upTo, position[d]!);
        covered[i] = upTo;
      });
      for (const o of optimizers) {
        const stage = o.action.stage;
        const at = position[o.id]!;
        const back = compute.slice(at + 1).find((id) => ["B", "I", "W"].includes(s.actions[id]!.action.kind) && s.actions[id]!.action.stage === stage);
        if (back !== undefined) report("order", [o.id, back], `${formatAction(o.action)} comes before ${actionLabel(s, back)}, a backward of its stage`);
        const late = comm.find((id, j) => j > covered[at]! && REDUCTIONS.has(s.actions[id]!.action.kind) && s.actions[id]!.action.stage === stage);
        if (late !== undefined) {
          report("order", [o.id, late], `${formatAction(o.action)} does not wait for ${actionLabel(s, late)}: it needs a dep on that reduction or a later comm action`);
        }
      }
    }
  }
}

function sameAction(x: Action, y: Action): boolean {
  return x.kind === y.kind && x.stage === y.stage && x.mb === y.mb && x.unit === y.unit && x.peer === y.peer;
}

/** Why a stuck group collective waits, for deadlock messages; undefined when `id` is not one. */
export function groupWait(s: LoweredSchedule, matching: CollectiveMatching | undefined, id: number): string | undefined {
  const k = matching?.setOf[id];
  if (k === undefined || k === SOLO) return undefined;
  const a = s.actions[id]!;
  if (k < 0) return `can never run: ${groupError(s, a) ?? "it is listed on another rank"}`;
  const set = matching!.sets[k]!;
  const absent = a.group!.filter((_, i) => set[i] === -1);
  return `waits for rank ${absent.join(", rank ")} of group [${a.group!.join(",")}], which never enter${absent.length === 1 ? "s" : ""} ${collectiveKey(a)}`;
}
