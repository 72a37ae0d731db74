// Programs as text for `fsm schedule`: one line per action per stream with its dependencies and predicted
// times; for one rank, peers resolved to that rank's replica (plan.ts says how).
import { formatAction, isP2PKind, parseAction } from "../schedule/action.js";
import type { Plan, PlanAction, PlanProgram } from "./plan.js";

/** The program a rank runs and its replica index there. */
export function programOfRank(plan: Plan, rank: number): { program: PlanProgram; replica: number; tensorRank: number } | undefined {
  // A program lists tensor rank 0 of each replica's group; the group's other ranks run it too.
  const tensorRank = rank % plan.settings.tensorParallel;
  for (const program of plan.programs) {
    const replica = program.ranks.indexOf(rank - tensorRank);
    if (replica >= 0) return { program, replica, tensorRank };
  }
  return undefined;
}

/** The action's text with its p2p peer moved by `peerOffset` ranks: to replica r, tensor rank t of the peer
 *  stage's groups, r · tensorParallel + t (plan.ts meshRank). */
export function actionTextFor(a: PlanAction, peerOffset: number): string {
  const parsed = parseAction(a.text);
  if (!parsed.ok || !isP2PKind(parsed.action.kind) || peerOffset === 0) return a.text;
  return formatAction({ ...parsed.action, peer: parsed.action.peer! + peerOffset });
}

const time = (t: number): string => (t < 1 ? `${(t * 1e3).toFixed(3)}ms` : `${t.toFixed(3)}s`);

function actionLine(program: PlanProgram, a: PlanAction, peerOffset: number): string {
  const text = (id: number) => `${id}:${actionTextFor(program.actions[id]!, peerOffset)}`;
  const parts = [`#${a.id}`.padStart(6), actionTextFor(a, peerOffset).padEnd(22), `${time(a.start)} .. ${time(a.end)}`];
  const waits: string[] = [];
  if (a.deps.length > 0) waits.push(`after ${a.deps.map(text).join(", ")}`);
  if (a.partial) waits.push(`after ${a.partial.map(([x, l]) => `${text(x)} layer ${l}`).join(", ")}`);
  if (a.gates) waits.push(`gates ${a.gates.map(([l, x]) => `layer ${l} on ${text(x)}`).join(", ")}`);
  if (a.collective) waits.push(`${a.collective.group} ${a.collective.of} ${a.collective.bytes} B`);
  return `${parts.join("  ")}${waits.length > 0 ? `  ${waits.join("; ")}` : ""}`.trimEnd();
}

export function formatProgram(program: PlanProgram, replica?: number, tensor: { rank: number; degree: number } = { rank: 0, degree: 1 }): string {
  const who =
    replica === undefined
      ? `ranks ${program.ranks.length === 1 ? program.ranks[0] : `${program.ranks[0]}..${program.ranks[program.ranks.length - 1]}`} (one line per action; peers as for replica 0)`
      : `rank ${program.ranks[replica]! + tensor.rank} (replica ${replica}${tensor.degree > 1 ? `, tensor rank ${tensor.rank}` : ""})`;
  const lines = [`program ${program.id}: pipeline rank ${program.pipeRank}, stage${program.stages.length > 1 ? "s" : ""} ${program.stages.join(", ")}, ${who}`];
  for (const stream of ["compute", "comm"] as const) {
    lines.push(`  ${stream}:`);
    for (const id of program.streams[stream]) lines.push(`  ${actionLine(program, program.actions[id]!, (replica ?? 0) * tensor.degree + tensor.rank)}`);
  }
  return lines.join("\n") + "\n";
}

export function formatPlanPrograms(plan: Plan, rank?: number): string {
  if (rank !== undefined) {
    const found = programOfRank(plan, rank);
    if (!found) throw new Error(`internal: rank ${rank} is in no program`);
    return formatProgram(found.program, found.replica, { rank: found.tensorRank, degree: plan.settings.tensorParallel });
  }
  return plan.programs.map((p) => formatProgram(p)).join("\n");
}
