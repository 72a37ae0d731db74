// Step 10b of compile: the plan's programs checked by the shared schedule validator (src/schedule/validate.ts)
// before the plan leaves, so that a compiler bug in ordering, pairing, group collectives, FREEs or the
// optimizer's waits shows up as a rank × step picture instead of a hung job.
//
// The programs are one pipeline replica: program p is rank p of a LoweredSchedule. Rank-valued fields are
// translated from the plan's mesh numbering (plan.ts) to pipeline ranks:
//   - p2p peers are replica-0 global ranks: pipe rank = peer / dataParallel;
//   - `data` collectives join the program's own replicas, which are not simulated and run the same list, so
//     their group is [p] with groupSize = dataParallel (lowered.ts's rule for replicas outside the schedule);
//     the root of a data BROADCAST/REDUCE stays as written (an absolute rank among those replicas);
//   - `tied` collectives join the pipeline ranks of the stages holding the weight, `world` every pipeline rank.
//     A tied all-reduce's unit is the weight's index in its own stage's plan.shard[stage].tied, so members
//     name different units, while the shared IR matches members by kind, micro-batch and unit: for validation
//     every member takes the unit of the first holder stage.
//
// The compile engine's intra-action waits have no counterpart in the shared IR, which knows whole actions:
//   - partial [a, layer] (wait until compute action a finishes a layer) becomes a dep on all of a;
//   - gates [layer, g] (compute waits for g before a layer) become a dep on g when the layer is the action's
//     first one, which is the same wait; gates on later layers are left out. Those gates are the FSDP
//     prefetch: the gather for layer k+1 waits (partial) for layer k−1 of the same action, so making both
//     whole-action waits would have the action wait for a gather that waits for the action, a cycle the
//     real program does not have (test/compile/check-programs.test.ts shows it on a sample). Leaving them
//     out only removes waits; that the real programs, mid-action gates included, never deadlock is what
//     compile's own engine run (simulate.ts) establishes.
// Making a partial wait a whole-action one cannot create a cycle once those gates are gone: the rest of a
// compute action after a layer waits for nothing but its stream.
import type { Plan, PlanAction, PlanProgram } from "../plan/plan.js";
import { actionFromText, formatAction, isComputeKind, isP2PKind, p2pAction, shardAction, type Action, type P2PKind, type ShardKind } from "../schedule/action.js";
import type { LoweredAction, LoweredSchedule, RankStreams } from "../schedule/lowered.js";
import { counterpart } from "../schedule/rules.js";
import { validate } from "../schedule/validate.js";

export interface ConvertOptions {
  /** Also map gates on later layers to whole-action deps (the mapping that makes real plans deadlock). */
  readonly allGates?: boolean;
}

/** The plan's programs as a lowered schedule of one pipeline replica; program p's action i gets id base[p] + i. */
export function programsSchedule(plan: Plan, options: ConvertOptions = {}): LoweredSchedule {
  // Pipeline rank p's replica 0 is mesh rank p · dataParallel · tensorParallel (plan.ts meshRank).
  const dp = plan.settings.dataParallel * plan.settings.tensorParallel;
  const ranks = plan.programs.length;
  const base: number[] = [];
  let n = 0;
  for (const prog of plan.programs) {
    base.push(n);
    n += prog.actions.length;
  }
  // Tied all-reduces: their group, by program and action.
  const tiedGroup = plan.programs.map(() => new Map<number, number[]>());
  const converted = plan.programs.map((prog, p) =>
    prog.actions.map((a, i) => {
      const action = toPipeRanks(actionFromText(a.text), dp, prog, a);
      if (a.collective?.group !== "tied") return action;
      const t = tiedOf(plan, action);
      tiedGroup[p]!.set(i, t.ranks);
      return shardAction(action.kind as ShardKind, action.stage, { ...(action.mb !== undefined && { mb: action.mb }), unit: t.unit });
    }),
  );
  // Where each p2p action is, by rank and text, to pair SENDs with RECVs.
  const byText = new Map<string, number>();
  converted.forEach((list, p) => list.forEach((a, i) => isP2PKind(a.kind) && byText.set(`${p} ${formatAction(a)}`, base[p]! + i)));
  const world = Array.from({ length: ranks }, (_, p) => p);
  const actions: LoweredAction[] = plan.programs.flatMap((prog, p) =>
    prog.actions.map((pa, i): LoweredAction => {
      const action = converted[p]![i]!;
      const deps = new Set<number>(pa.deps.map((d) => base[p]! + d));
      for (const [x] of pa.partial ?? []) deps.add(base[p]! + x);
      const first = isComputeKind(action.kind) ? firstLayer(plan, action) : undefined;
      for (const [layer, g] of pa.gates ?? []) if (options.allGates || layer === first) deps.add(base[p]! + g);
      const out: { -readonly [K in keyof LoweredAction]: LoweredAction[K] } = { id: base[p]! + i, rank: p, stream: pa.stream, action, deps: [...deps] };
      if (isP2PKind(action.kind)) {
        const other = counterpart(action, p);
        const m = other && byText.get(`${other.rank} ${formatAction(p2pAction(other.kind as P2PKind, other.stage, other.mb, other.peer!))}`);
        if (m !== undefined) out.match = m;
      }
      if (pa.collective) {
        const c = pa.collective;
        out.bytes = c.bytes;
        if (c.group === "data") {
          out.group = [p];
          out.groupSize = dp;
        } else if (c.group === "world") {
          out.group = world;
          out.groupSize = plan.cluster.devices / plan.settings.tensorParallel;
        } else out.group = tiedGroup[p]!.get(i)!;
      }
      return out;
    }),
  );
  const streams: RankStreams[] = plan.programs.map((prog, p) => ({
    compute: prog.streams.compute.map((id) => base[p]! + id),
    comm: prog.streams.comm.map((id) => base[p]! + id),
  }));
  return {
    name: `compiled ${plan.model.name}`,
    ranks,
    stages: plan.stages.length,
    microBatches: plan.settings.microBatches,
    stageRank: plan.stages.map((s) => s.pipeRank),
    actions,
    streams,
  };
}

/** Throws an internal error with every problem and the rank × step picture when the programs are invalid. */
export function checkPrograms(plan: Plan): void {
  const v = validate(programsSchedule(plan));
  if (v.ok) return;
  const shown = v.problems.slice(0, 20).map((p) => `  ${p.message}`);
  if (v.problems.length > shown.length) shown.push(`  … and ${v.problems.length - shown.length} more`);
  throw new Error(`internal: compile produced programs that fail schedule validation (a compiler bug):\n${shown.join("\n")}\n${v.picture}`);
}

/** A p2p action with its peer as a pipeline rank; other actions as they are. */
function toPipeRanks(a: Action, dp: number, prog: PlanProgram, pa: PlanAction): Action {
  if (!isP2PKind(a.kind)) return a;
  const peer = a.peer!;
  if (peer % dp !== 0) throw new Error(`internal: program ${prog.id} ${pa.text} names peer rank ${peer}, which is not a replica-0 rank`);
  return p2pAction(a.kind, a.stage, a.mb!, peer / dp);
}

/** The layer a compute action runs first: F and R run their stage's layers up, B, I and W down. */
function firstLayer(plan: Plan, a: Action): number {
  const [lo, hi] = plan.stages[a.stage]!.layers;
  return a.kind === "F" || a.kind === "R" ? lo : hi;
}

/** A tied all-reduce's weight: the pipeline ranks of the stages holding it, and its unit on the first of them. */
function tiedOf(plan: Plan, a: Action): { ranks: number[]; unit: number } {
  const t = plan.shard[a.stage]?.tied.find((x) => x.unit === a.unit);
  if (!t) throw new Error(`internal: ${formatAction(a)} is a tied all-reduce of no tied weight of stage ${a.stage}`);
  const first = plan.shard[t.stages[0]!]!.tied.find((x) => x.param === t.param);
  if (!first) throw new Error(`internal: stage ${t.stages[0]} holds no tied weight '${t.param}'`);
  return { ranks: [...new Set(t.stages.map((s) => plan.stages[s]!.pipeRank))].sort((x, y) => x - y), unit: first.unit };
}
