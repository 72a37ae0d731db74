// Load-time check that every program does all the work its stages' shard plans call for, no less and no more:
// one OPTIMIZER per stage, and exactly the collectives compile places (compile/collectives.ts, tied.ts,
// optimizer-step.ts) — each shard collective and tied all-reduce of plan.shard[k] once per compute action its
// step point names (occurrencesOf, the compiler's own rule), and with clipping one world all-reduce of the
// gradient norm per program. The schedule validator cannot see a missing reduction or optimizer step: the
// rest of the programs still pair and run, and train wrongly.
import { occurrencesOf } from "../compile/collectives.js";
import { needsNormAllReduce } from "../cost/grad-norm.js";
import type { StageOccurrences } from "../compile/placer.js";
import type { ShardStrategy } from "../check/settings-types.js";
import type { StepPoint } from "../shard/types.js";
import { actionFromText, formatAction, isCollectiveKind, shardAction, type ShardKind } from "../schedule/action.js";
import { fail } from "../plan/json-check.js";
import type { Plan, PlanProgram, PlanStepPoint } from "../plan/plan.js";

/** A collective the shard plans call for, and the plan element that calls for it (for the message). */
interface Expected {
  readonly text: string;
  readonly group: string;
  readonly of: string;
  readonly path: string;
  readonly why: string;
}

const keyOf = (text: string, group: string | undefined, of: string | undefined): string => `${text} ${group ?? "-"} ${of ?? "-"}`;

/** Throws PlanError at the first missing or extra action; the plan has passed checkSchedule (every stage has
 *  its forwards and backwards, so every step point has its compute actions). */
export function checkCompleteness(plan: Plan): void {
  const s = plan.settings;
  const norm = needsNormAllReduce({ clipGradNorm: s.clipGradNorm ?? undefined, devices: plan.cluster.devices, stages: s.stages, shard: s.shard as ShardStrategy, tensorParallel: s.tensorParallel });
  plan.programs.forEach((prog, p) => {
    const expected: Expected[] = [];
    for (const k of prog.stages) {
      const occ = occurrences(prog, k);
      if (occ.optimizer < 0) fail(`programs[${p}]`, `stage ${k} has no OPTIMIZER (${k}OPTIMIZER): its weights would never be updated`);
      for (const c of stageCollectives(plan, p, k, occ)) expected.push(c);
    }
    if (norm) {
      const text = formatAction(shardAction("ALL_REDUCE", Math.min(...prog.stages)));
      expected.push({ text, group: "world", of: "gradNorm", path: "settings.clipGradNorm", why: "the all-reduce of the gradient norm for clipping" });
    }
    compare(prog, p, expected);
  });
}

/** The stage's compute actions in compute-stream order, grouped as the compiler's placer groups them. */
function occurrences(prog: PlanProgram, stage: number): StageOccurrences {
  const occ: StageOccurrences = { F: [], R: [], B: [], I: [], W: [], forwardLike: [], backwardLike: [], weightLike: [], optimizer: -1 };
  for (const id of prog.streams.compute) {
    const a = actionFromText(prog.actions[id]!.text);
    if (a.stage !== stage) continue;
    const kind = a.kind;
    if (kind === "OPTIMIZER") occ.optimizer = id;
    else if (kind === "F" || kind === "R" || kind === "B" || kind === "I" || kind === "W") occ[kind].push(id);
    if (kind === "F" || kind === "R") occ.forwardLike.push(id);
    if (kind === "B" || kind === "I") occ.backwardLike.push(id);
    if (kind === "B" || kind === "W") occ.weightLike.push(id);
  }
  return occ;
}

function stageCollectives(plan: Plan, p: number, k: number, occ: StageOccurrences): Expected[] {
  const prog = plan.programs[p]!;
  const out: Expected[] = [];
  const at = (point: PlanStepPoint, path: string): (number | undefined)[] => {
    if (point.phase === "optimizer") return [undefined];
    let xs: number[];
    try {
      xs = occurrencesOf(point as StepPoint, occ); // validatePlan has checked its phase
    } catch {
      fail(path, `names ${point.phase} actions of stage ${k}, and programs[${p}] has none`);
    }
    return xs.map((x) => (point.microBatch === "each" ? actionFromText(prog.actions[x]!.text).mb : undefined));
  };
  const shard = plan.shard[k]!;
  shard.collectives.forEach((c, ci) => {
    const path = `shard[${k}].collectives[${ci}]`;
    for (const mb of at(c.at, path)) {
      const text = formatAction(shardAction(c.kind as ShardKind, k, { ...(mb !== undefined && { mb }), unit: c.unit, ...(c.root !== undefined && { peer: c.root }) }));
      out.push({ text, group: "data", of: c.of, path, why: `the stage's ${c.kind.toLowerCase()} of ${c.of} ${c.unit}${mb === undefined ? "" : ` for micro-batch ${mb}`}` });
    }
  });
  shard.tied.forEach((t, ti) => {
    const path = `shard[${k}].tied[${ti}]`;
    for (const mb of at(t.at, path)) {
      const text = formatAction(shardAction("ALL_REDUCE", k, { ...(mb !== undefined && { mb }), unit: t.unit }));
      out.push({ text, group: "tied", of: "tiedGrad", path, why: `the all-reduce of the tied weight '${t.param}'${mb === undefined ? "" : ` for micro-batch ${mb}`}` });
    }
  });
  return out;
}

/** The program's collectives must be exactly the expected ones (as multisets: a gather can recur). */
function compare(prog: PlanProgram, p: number, expected: readonly Expected[]): void {
  const left = new Map<string, number>();
  for (const e of expected) left.set(keyOf(e.text, e.group, e.of), (left.get(keyOf(e.text, e.group, e.of)) ?? 0) + 1);
  prog.actions.forEach((a, i) => {
    if (!isCollectiveKind(actionFromText(a.text).kind)) return;
    const key = keyOf(a.text, a.collective?.group, a.collective?.of);
    const n = left.get(key) ?? 0;
    if (n === 0) {
      const as = a.collective ? `a ${a.collective.group} collective of ${a.collective.of}` : "a collective without its group";
      fail(`programs[${p}].actions[${i}]`, `${a.text} (${as}) is more than the stage's shard plan calls for`);
    }
    left.set(key, n - 1);
  });
  for (const e of expected) {
    const key = keyOf(e.text, e.group, e.of);
    const n = left.get(key)!;
    if (n > 0) fail(e.path, `${e.text} is missing from programs[${p}]: ${e.why}`);
  }
}
