// Programs as text for `fsm schedule`: one line per action per stream with its dependencies and predicted
// times; for one rank, peers resolved to that rank's replica (plan.ts says how).
import { formatAction, isP2PKind, parseAction } from "../schedule/action.js";
import type { Plan, PlanAction, PlanProgram } from "./plan.js";

/** The program a rank runs and its replica index there. */
export function programOfRank(plan: Plan, rank: number): { program: PlanProgram; replica: number } | undefined {
  for (const program of plan.programs) {
    const replica = program.ranks.indexOf(rank);
    if (replica >= 0) return { program, replica };
  }
  return undefined;
}

/** The action's text with its p2p peer moved to replica `replica` (tensor degree 1: peer + replica). */
export function actionTextFor(a: PlanAction, replica: number): string {
  const parsed = parseAction(a.text);
  if (!parsed.ok || !isP2PKind(parsed.action.kind) || replica === 0) return a.text;
  return formatAction({ ...parsed.action, peer: parsed.action.peer! + replica });
}

const time = (t: number): string => (t < 1 ? `${(t * 1e3).toFixed(3)}ms` : `${t.toFixed(3)}s`);

function actionLine(program: PlanProgram, a: PlanAction, replica: number): string {
  const text = (id: number) => `${id}:${actionTextFor(program.actions[id]!, replica)}`;
  const parts = [`#${a.id}`.padStart(6), actionTextFor(a, replica).padEnd(22), `${time(a.start)} .. ${time(a.end)}`];
  const waits: string[] = [];
  if (a.deps.length > 0) waits.push(`after ${a.deps.map(text).join(", ")}`);
  if (a.partial) waits.push(`after ${a.partial.map(([x, l]) => `${text(x)} layer ${l}`).join(", ")}`);
  if (a.gates) waits.push(`gates ${a.gates.map(([l, x]) => `layer ${l} on ${text(x)}`).join(", ")}`);
  if (a.collective) waits.push(`${a.collective.group} ${a.collective.of} ${a.collective.bytes} B`);
  return `${parts.join("  ")}${waits.length > 0 ? `  ${waits.join("; ")}` : ""}`.trimEnd();
}

export function formatProgram(program: PlanProgram, replica?: number): string {
  const who =
    replica === undefined
      ? `ranks ${program.ranks.length === 1 ? program.ranks[0] : `${program.ranks[0]}..${program.ranks[program.ranks.length - 1]}`} (one line per action; peers as for replica 0)`
      : `rank ${program.ranks[replica]} (replica ${replica})`;
  const lines = [`program ${program.id}: pipeline rank ${program.pipeRank}, stage${program.stages.length > 1 ? "s" : ""} ${program.stages.join(", ")}, ${who}`];
  for (const stream of ["compute", "comm"] as const) {
    lines.push(`  ${stream}:`);
    for (const id of program.streams[stream]) lines.push(`  ${actionLine(program, program.actions[id]!, replica ?? 0)}`);
  }
  return lines.join("\n") + "\n";
}

export function formatPlanPrograms(plan: Plan, rank?: number): string {
  if (rank !== undefined) {
    const found = programOfRank(plan, rank);
    if (!found) throw new Error(`internal: rank ${rank} is in no program`);
    return formatProgram(found.program, found.replica);
  }
  return plan.programs.map((p) => formatProgram(p)).join("\n");
}
