// Load-time check of the programs against the rules every schedule obeys (src/schedule/validate.ts, the same
// validator compile runs on its own output): each stage's forward and backward once per micro-batch and in
// order, SENDs paired with RECVs on the right peers, group collectives entered by every member in the same
// order with the same bytes, FREEs after their gathers, the OPTIMIZER after its backwards and reductions, and
// no wait cycle on or across streams. The first problem is refused with the JSON path of its action.
//
// The validator speaks pipeline ranks (compile/check-programs.ts converts the plan); its messages are turned
// back into the plan's numbering, replica 0's global ranks (pipeline rank p is rank p · dataParallel), the
// way the programs' own texts name peers.
import { programsSchedule } from "../compile/check-programs.js";
import { actionFromText, isP2PKind } from "../schedule/action.js";
import { validate, type Problem } from "../schedule/validate.js";
import { fail } from "../plan/json-check.js";
import type { Plan } from "../plan/plan.js";

/** Throws PlanError at the first problem; the plan has passed validatePlan and checkPlacement. */
export function checkSchedule(plan: Plan): void {
  checkConvertible(plan);
  const v = validate(programsSchedule(plan));
  if (v.ok) return;
  const first = v.problems[0]!;
  const more = v.problems.length > 1 ? ` (and ${v.problems.length - 1} more problem${v.problems.length > 2 ? "s" : ""})` : "";
  fail(problemPath(plan, first), `${inPlanRanks(withoutWhere(first.message), plan.settings.dataParallel * plan.settings.tensorParallel)}${more}`);
}

/** What programsSchedule assumes and would otherwise throw on: p2p peers are replica-0 ranks, and each tied
 *  all-reduce names a tied weight of its stage that its first holder stage holds too. */
function checkConvertible(plan: Plan): void {
  // Replica 0 of pipeline rank p is mesh rank p · dataParallel · tensorParallel (plan.ts meshRank).
  const dp = plan.settings.dataParallel * plan.settings.tensorParallel;
  plan.programs.forEach((prog, p) =>
    prog.actions.forEach((pa, i) => {
      const path = `programs[${p}].actions[${i}]`;
      const a = actionFromText(pa.text);
      if (isP2PKind(a.kind) && a.peer! % dp !== 0) {
        fail(`${path}.text`, `${pa.text} names peer rank ${a.peer}, which is not a replica-0 rank (a multiple of dataParallel × tensorParallel = ${dp}): peers are written as replica 0's`);
      }
      if (pa.collective?.group !== "tied") return;
      const tied = plan.shard[a.stage]?.tied.find((t) => t.unit === a.unit);
      if (!tied) fail(`${path}.text`, `${pa.text} is a tied all-reduce, but stage ${a.stage} has no tied weight with unit ${a.unit ?? "(none)"} (shard[${a.stage}].tied)`);
      const holder = tied.stages[0];
      if (holder === undefined || !plan.shard[holder]?.tied.some((t) => t.param === tied.param)) {
        fail(`shard[${a.stage}].tied`, `the tied weight '${tied.param}' names stage ${holder ?? "(none)"} as its first holder, which does not hold it`);
      }
    }),
  );
}

/** The first offending action of the problem, as programs[p].actions[i]; else its program; else the programs. */
function problemPath(plan: Plan, problem: Problem): string {
  const id = problem.ids[0];
  if (id !== undefined) {
    let base = 0;
    for (const [p, prog] of plan.programs.entries()) {
      if (id < base + prog.actions.length) return `programs[${p}].actions[${id - base}]`;
      base += prog.actions.length;
    }
  }
  return problem.rank === undefined ? "programs" : `programs[${problem.rank}]`;
}

/** `rank 1, step 4: …`: where the path already says it; the step is of the validator's unit-time run. */
function withoutWhere(message: string): string {
  return message.replace(/^rank \d+(?:, (?:step \d+|never reached))?: /, "");
}

/** Pipeline ranks in a validator message as the plan's replica-0 ranks: `rank 1` and `@1` become p · dp. */
export function inPlanRanks(message: string, dp: number): string {
  if (dp === 1) return message;
  return message
    .replace(/\brank (\d+)/g, (_, r: string) => `rank ${Number(r) * dp}`)
    .replace(/((?:SEND|RECV)_[FB]\d+)@(\d+)/g, (_, head: string, r: string) => `${head}@${Number(r) * dp}`)
    .replace(/group \[([\d,]+)\]/g, (_, g: string) => `group [${g.split(",").map((r) => Number(r) * dp).join(",")}]`);
}
