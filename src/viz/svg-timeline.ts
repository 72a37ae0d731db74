// The schedule timeline as SVG: a row per program (predicted) or device (measured), a compute lane with its
// idle stretches shaded and a comm lane under it; blocks colored by stage, hover details in <title>. A
// compute block of a tensor-parallel plan ends in a hatched share: the time its collectives take.
import { esc, formatSeconds, num, stageColor } from "./format.js";
import { timeAxis, type SvgPart } from "./svg-part.js";
import type { Block, Lane, Timeline, TimelineRow } from "./view-types.js";

const LABEL_WIDTH = 150;
const PLOT_WIDTH = 1000;
const COMPUTE_H = 18;
const COMM_H = 11;
const ROW_GAP = 7;
const ROW_H = COMPUTE_H + COMM_H + ROW_GAP;
const TOP = 34;
/** Approximate width of a 10px monospace character: labels are drawn only where they fit. */
const CHAR_W = 6.1;
/** The hatching of tensor-parallel collectives; only the predicted timeline has them, so one id per page. */
const TP_PATTERN =
  '<defs><pattern id="tp-hatch" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="1.6" height="4" fill="#202124"/></pattern></defs>';

/** The last `tpSeconds` of a compute block, hatched (the collectives run spread through it; this is their share),
 *  along the block's lower third: however large the share, the block itself stays under the pointer. */
function tpMark(b: Block, x: (t: number) => number, y: number, h: number): string {
  if (b.tpSeconds === undefined) return "";
  const x0 = x(b.end - b.tpSeconds);
  const title = `tensor-parallel collectives inside ${b.label}: ${formatSeconds(b.tpSeconds)} of ${formatSeconds(b.end - b.start)} (cost model)`;
  const strip = h / 3;
  return `<rect class="tp" x="${num(x0)}" y="${num(y + h - strip)}" width="${num(Math.max(0.6, x(b.end) - x0))}" height="${num(strip)}" fill="url(#tp-hatch)"><title>${esc(title)}</title></rect>`;
}

function blockRect(b: Block, x: (t: number) => number, y: number, h: number): string {
  const x0 = x(b.start);
  const w = Math.max(0.6, x(b.end) - x0);
  // Pipeline compute is in its stage's color; communication and the optimizer in their kind's (CSS).
  const colored = b.kind === "forward" || b.kind === "backward" || b.kind === "weight" || b.kind === "recompute";
  const fill = colored && b.stage !== undefined ? ` fill="${stageColor(b.stage)}"` : "";
  const mb = b.mb !== undefined ? ` data-mb="${b.mb}"` : "";
  const rect = `<rect class="b ${b.kind}"${mb} x="${num(x0)}" y="${num(y)}" width="${num(w)}" height="${h}"${fill}><title>${esc(b.details)}</title></rect>${tpMark(b, x, y, h)}`;
  if (w < b.label.length * CHAR_W + 3 || h < COMPUTE_H) return rect;
  return `${rect}<text x="${num(x0 + 2)}" y="${num(y + h - 5)}" pointer-events="none">${esc(b.label)}</text>`;
}

function laneMarkup(lane: Lane, x: (t: number) => number, y: number, h: number): string {
  const idle = lane.idle.map(
    (g) => `<rect class="idle" x="${num(x(g.start))}" y="${num(y)}" width="${num(Math.max(0.6, x(g.end) - x(g.start)))}" height="${h}"><title>idle ${esc(formatSeconds(g.end - g.start))} (${esc(formatSeconds(g.start))} .. ${esc(formatSeconds(g.end))})</title></rect>`,
  );
  return idle.join("") + lane.blocks.map((b) => blockRect(b, x, y, h)).join("");
}

function rowMarkup(t: Timeline, r: TimelineRow, i: number, x: (t: number) => number): string {
  const y = TOP + i * ROW_H;
  const attrs = t.kind === "predicted" ? ` data-program="${r.program}"` : ` data-device="${r.device}" data-of-program="${r.program}"`;
  const stages = `stage${r.stages.length === 1 ? "" : "s"} ${r.stages.join(", ")}`;
  return (
    `<g class="row ${t.kind}"${attrs}>` +
    `<text x="4" y="${num(y + 12)}">${esc(r.label)}</text>` +
    `<text class="lane-label" x="4" y="${num(y + COMPUTE_H + 9)}">${esc(stages)}</text>` +
    laneMarkup(r.lanes[0], x, y, COMPUTE_H) +
    laneMarkup(r.lanes[1], x, y + COMPUTE_H + 1, COMM_H) +
    "</g>"
  );
}

/** A timeline drawn at `scale` seconds across the plot, so predicted and measured share one axis. */
export function timelineSvg(t: Timeline, scale: number): SvgPart {
  const s = scale > 0 ? scale : 1;
  const x = (time: number) => LABEL_WIDTH + (time * PLOT_WIDTH) / s;
  const height = TOP + t.rows.length * ROW_H + 4;
  const hatched = t.rows.some((r) => r.lanes[0].blocks.some((b) => b.tpSeconds !== undefined));
  const body =
    (hatched ? TP_PATTERN : "") +
    `<text class="title" x="4" y="14">${esc(t.caption)}</text>` +
    timeAxis(s, LABEL_WIDTH, PLOT_WIDTH, TOP - 2, height - 4) +
    t.rows.map((r, i) => rowMarkup(t, r, i, x)).join("");
  return { width: LABEL_WIDTH + PLOT_WIDTH + 10, height, body: `<g class="viz timeline">${body}</g>` };
}
