// The character-cell timeline and memory strips of `fsm viz --format text`: fixed columns over the step,
// each block starting with its label (`F3`, `>F3`, `AG`) and filled with `-`; idle compute is `.`.
import { formatBytes, formatSeconds, pct } from "./format.js";
import type { Block, BlockKind, MemoryCurve, Timeline } from "./view-types.js";

/** Columns of the time axis. */
const TEXT_COLUMNS = 96;

const SHORT: Readonly<Record<BlockKind, string>> = {
  forward: "F",
  backward: "B",
  weight: "W",
  recompute: "R",
  send: ">",
  recv: "<",
  collective: "=",
  optimizer: "O",
  other: "?",
};

export const TEXT_LEGEND = "F forward, B backward (I: input gradient), W weight gradient, R recompute, > send, < receive, = collective, O optimizer, . idle compute";
/** The tensor-parallel lane's legend, for plans that have one. */
export const TP_LEGEND = "tp: ~ the tensor-parallel collectives inside the compute block above (their cost-model seconds, drawn at its end)";

/** `F3`, `I3`, `>F3`, `AG`, `O`: what fits the start of a block. */
function shortLabel(b: Block): string {
  if (b.kind === "send" || b.kind === "recv") return `${SHORT[b.kind]}${b.label.slice(5)}`;
  if (b.kind === "collective") return b.label.split(" ")[0]!;
  if (b.kind === "optimizer") return "O";
  return b.label;
}

function lane(blocks: readonly Block[], dt: number, idle: string): string {
  const cells = new Array<string>(TEXT_COLUMNS).fill(idle);
  // Later blocks overwrite earlier ones, so every block's first cell keeps its letter unless the next one
  // starts in the same cell (then the later one wins, as it is the one still running at the cell's end).
  for (const b of [...blocks].sort((x, y) => x.start - y.start || x.end - y.end)) {
    const c0 = Math.min(TEXT_COLUMNS - 1, Math.floor(b.start / dt));
    const c1 = Math.min(TEXT_COLUMNS, Math.max(c0 + 1, Math.ceil(b.end / dt)));
    // A label cut short would lie (`B1` of `B17`): the whole label when it fits, else the kind's letter.
    const full = shortLabel(b);
    const label = full.length <= c1 - c0 ? full : full.slice(0, 1);
    for (let c = c0; c < c1; c++) cells[c] = c - c0 < label.length ? label[c - c0]! : "-";
  }
  return cells.join("");
}

/** The columns of each compute block's last `tpSeconds` marked `~`: where its tensor-parallel collectives
 *  are drawn (they run spread through the block; the lane shows how much of it they take). */
function tpLane(blocks: readonly Block[], dt: number): string {
  const cells = new Array<string>(TEXT_COLUMNS).fill(" ");
  for (const b of blocks) {
    if (b.tpSeconds === undefined) continue;
    const c1 = Math.min(TEXT_COLUMNS, Math.max(1, Math.ceil(b.end / dt)));
    const c0 = Math.min(c1 - 1, Math.floor((b.end - b.tpSeconds) / dt));
    for (let c = c0; c < c1; c++) cells[c] = "~";
  }
  return cells.join("");
}

/** Rows of a timeline at `scale` seconds across TEXT_COLUMNS (shared by predicted and measured); a third
 *  lane, `tp`, where compute blocks carry tensor-parallel collectives. */
export function timelineText(t: Timeline, scale: number): string[] {
  const dt = scale / TEXT_COLUMNS;
  const width = Math.max(...t.rows.map((r) => r.label.length));
  const lines = [`${t.caption}; one column = ${formatSeconds(dt)}`];
  for (const r of t.rows) {
    lines.push(`  ${r.label.padEnd(width)}  compute |${lane(r.lanes[0].blocks, dt, ".")}|`);
    lines.push(`  ${"".padEnd(width)}  comm    |${lane(r.lanes[1].blocks, dt, " ")}|`);
    if (r.lanes[0].blocks.some((b) => b.tpSeconds !== undefined)) lines.push(`  ${"".padEnd(width)}  tp      |${tpLane(r.lanes[0].blocks, dt)}|`);
  }
  return lines;
}

const LEVELS = " _.-=+*#%@";

/** One strip per program: live bytes over the step in ten levels of the fullest arena. */
export function memoryText(curves: readonly MemoryCurve[], stepSeconds: number): string[] {
  const top = Math.max(1, ...curves.map((c) => c.arenaBytes));
  const dt = stepSeconds / TEXT_COLUMNS;
  const width = Math.max(...curves.map((c) => c.label.length));
  const lines = [`live bytes over the step, '${LEVELS.slice(1)}' = tenths of ${formatBytes(top)} (the largest arena); capacity ${formatBytes(curves[0]?.capacityBytes ?? 0)} per device`];
  for (const c of curves) {
    const cells: string[] = [];
    let i = 0;
    let live = 0;
    for (let col = 0; col < TEXT_COLUMNS; col++) {
      const end = (col + 1) * dt;
      // The most bytes live at any moment of the column: the value entering it and every change inside.
      let most = live;
      while (i < c.points.length && c.points[i]![0] < end) {
        live = c.points[i]![1];
        most = Math.max(most, live);
        i++;
      }
      cells.push(LEVELS[Math.min(LEVELS.length - 1, Math.ceil((most / top) * (LEVELS.length - 1)))]!);
    }
    lines.push(`  ${c.label.padEnd(width)}  |${cells.join("")}|  peak ${formatBytes(c.planPeakBytes)}, arena ${formatBytes(c.arenaBytes)} (${pct(c.arenaBytes / c.capacityBytes)} of capacity)`);
  }
  return lines;
}
