// Timeline rows: a program's (or a measured device's) actions as timed blocks on a compute and a comm lane,
// classified and labelled from the action text, with the compute lane's idle stretches (the bubbles).
import type { Plan, PlanAction, PlanProgram } from "../plan/plan.js";
import { parseAction, type Action } from "../schedule/action.js";
import { formatBytes, formatSeconds, ranksLabel } from "./format.js";
import { tensorDevices } from "./tensor-map.js";
import type { TpSecondsOf } from "./tensor-collectives.js";
import type { Block, BlockKind, Lane, Timeline, TimelineRow } from "./view-types.js";

const COLLECTIVE_ABBR: Readonly<Record<string, string>> = { ALL_GATHER: "AG", REDUCE_SCATTER: "RS", ALL_REDUCE: "AR", BROADCAST: "BC", REDUCE: "RD" };

function kindOf(a: Action): BlockKind {
  switch (a.kind) {
    case "F":
      return "forward";
    case "B":
    case "I":
      return "backward";
    case "W":
      return "weight";
    case "R":
      return "recompute";
    case "SEND_F":
    case "SEND_B":
      return "send";
    case "RECV_F":
    case "RECV_B":
      return "recv";
    case "OPTIMIZER":
      return "optimizer";
    default:
      return "collective";
  }
}

function labelOf(a: Action, kind: BlockKind): string {
  if (kind === "send" || kind === "recv") return `${kind} ${a.kind.slice(-1)}${a.mb}`;
  if (kind === "optimizer") return "opt";
  const abbr = COLLECTIVE_ABBR[a.kind];
  if (abbr !== undefined) return `${abbr}${a.unit !== undefined ? ` u${a.unit}` : ""}`;
  return `${a.kind}${a.mb ?? ""}`;
}

/** A block for an action named `text` (plan action text or trace event name) running [start, end]; none for
 *  a FREE, a zero-time marker that releases memory and has nothing to draw. `tp`: the predicted seconds of
 *  the tensor-parallel collectives inside a compute action. */
export function blockFor(text: string, start: number, end: number, extra: string, tp?: TpSecondsOf): Block | undefined {
  const parsed = parseAction(text);
  const span = `${formatSeconds(start)} .. ${formatSeconds(end)} (${formatSeconds(end - start)})`;
  if (!parsed.ok) return { kind: "other", label: text, start, end, details: `${text}: ${span}${extra}` };
  const a = parsed.action;
  if (a.kind === "FREE") return undefined;
  const where = [`stage ${a.stage}`, ...(a.mb !== undefined ? [`micro-batch ${a.mb}`] : []), ...(a.unit !== undefined ? [`unit ${a.unit}`] : [])];
  const kind = kindOf(a);
  // A block cannot spend longer in collectives than it lasts (an estimate against the planned length).
  const tpSeconds = Math.min(tp?.(a) ?? 0, end - start);
  const inner = tpSeconds > 0 ? `; tensor-parallel collectives ${formatSeconds(tpSeconds)} (cost model)` : "";
  return {
    kind,
    label: labelOf(a, kind),
    stage: a.stage,
    ...(a.mb !== undefined && { mb: a.mb }),
    start,
    end,
    details: `${text} (${where.join(", ")}): ${span}${extra}${inner}`,
    ...(tpSeconds > 0 && { tpSeconds }),
  };
}

function predictedExtra(a: PlanAction): string {
  const c = a.collective;
  return c ? `; ${c.group} ${c.of} ${formatBytes(c.bytes)}` : "";
}

/** Idle stretches of a compute lane over [0, stepSeconds]; shorter than `eps` is no gap (rounding). */
function idleOf(blocks: readonly Block[], stepSeconds: number): { start: number; end: number }[] {
  const eps = stepSeconds * 1e-6;
  const sorted = [...blocks].sort((x, y) => x.start - y.start || x.end - y.end);
  const gaps: { start: number; end: number }[] = [];
  let t = 0;
  for (const b of sorted) {
    if (b.start - t > eps) gaps.push({ start: t, end: b.start });
    t = Math.max(t, b.end);
  }
  if (stepSeconds - t > eps) gaps.push({ start: t, end: stepSeconds });
  return gaps;
}

export function lanes(compute: readonly (Block | undefined)[], comm: readonly (Block | undefined)[], stepSeconds: number): [Lane, Lane] {
  const c = compute.filter((b) => b !== undefined);
  return [
    { stream: "compute", blocks: c, idle: idleOf(c, stepSeconds) },
    { stream: "comm", blocks: comm.filter((b) => b !== undefined), idle: [] },
  ];
}

function programRow(program: PlanProgram, stepSeconds: number, tensorParallel: number, tp: TpSecondsOf | undefined): TimelineRow {
  const block = (id: number) => {
    const a = program.actions[id]!;
    return blockFor(a.text, a.start, a.end, predictedExtra(a), tp);
  };
  return {
    program: program.id,
    label: ranksLabel(tensorDevices(program.ranks, tensorParallel)),
    stages: program.stages,
    lanes: lanes(program.streams.compute.map(block), program.streams.comm.map(block), stepSeconds),
  };
}

/**
 * The predicted step: one row per program (its data-parallel replicas and the ranks of their tensor-parallel
 * groups run the same actions, so one row with their rank range stands for all of them; peers in the details
 * are the first replica's). `tp`: the tensor-parallel collectives inside compute actions, when the plan has any.
 */
export function predictedTimeline(plan: Plan, tp?: TpSecondsOf): Timeline {
  const step = plan.predicted.stepTimeSeconds;
  return {
    kind: "predicted",
    caption: `predicted step ${formatSeconds(step)}`,
    stepSeconds: step,
    rows: plan.programs.map((p) => programRow(p, step, plan.settings.tensorParallel, tp)),
  };
}
