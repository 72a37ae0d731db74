// The rank × step text picture of a schedule run: rows are ranks' streams, columns unit time steps.
import { formatAction } from "./action.js";
import type { Execution } from "./execute.js";
import { STREAMS, type LoweredSchedule } from "./lowered.js";

export interface PictureOptions {
  /** Actions drawn in brackets: the offending ones. */
  readonly marks?: ReadonlySet<number>;
  /** Most step columns to draw (default 24); with marks, the window ends just after the first one. */
  readonly maxColumns?: number;
}

/**
 * `run` must come from `execute(s, () => 1)`, so each start time is a step. A stream's stuck action (one that
 * can never start) is drawn with a trailing `!` at the step its stream fell idle; marked actions are in
 * [brackets]; `.` is an idle step.
 */
export function renderPicture(s: LoweredSchedule, run: Execution, opts: PictureOptions = {}): string {
  const marks = opts.marks ?? new Set<number>();
  const maxColumns = Math.max(4, opts.maxColumns ?? 24);
  const stuck = new Map(run.blocked.map((b) => [b.id, b.since] as const));
  const stepOf = (id: number): number | undefined => {
    const t = run.start[id];
    if (t !== undefined && !Number.isNaN(t)) return t;
    return stuck.get(id);
  };

  const rows: { label: string; cells: Map<number, string> }[] = [];
  let last = 0;
  s.streams.forEach((st, rank) => {
    for (const stream of STREAMS) {
      const cells = new Map<number, string>();
      for (const id of st[stream]) {
        const a = s.actions[id];
        const t = stepOf(id);
        if (!a || t === undefined) continue;
        let text = formatAction(a.action);
        if (marks.has(id)) text = `[${text}]`;
        if (stuck.has(id)) text += "!";
        cells.set(t, text);
        last = Math.max(last, t);
      }
      rows.push({ label: `r${rank} ${stream}`, cells });
    }
  });

  const markSteps = [...marks].map(stepOf).filter((t): t is number => t !== undefined);
  const focus = markSteps.length > 0 ? Math.min(...markSteps) : 0;
  const from = markSteps.length > 0 ? Math.max(0, Math.min(focus - (maxColumns - 4), last - maxColumns + 1)) : 0;
  const to = Math.min(last, from + maxColumns - 1);

  const cols: number[] = [];
  for (let t = from; t <= to; t++) cols.push(t);
  const width = Math.max(1, ...cols.map((t) => Math.max(String(t).length, ...rows.map((r) => r.cells.get(t)?.length ?? 1))));
  const labelWidth = Math.max(4, ...rows.map((r) => r.label.length));
  const line = (label: string, cell: (t: number) => string): string =>
    `${label.padEnd(labelWidth)} |${from > 0 ? " …" : ""}${cols.map((t) => ` ${cell(t).padEnd(width)}`).join("")}${to < last ? " …" : ""}`.trimEnd();
  const out = [line("step", (t) => String(t))];
  for (const r of rows) out.push(line(r.label, (t) => r.cells.get(t) ?? "."));
  return out.join("\n");
}
