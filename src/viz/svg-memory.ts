// Memory per device over the predicted step as SVG: one step curve per program (its devices allocate alike)
// in its stage's color, the device capacity as a dashed line, a legend with each program's peak and arena.
import { esc, formatBytes, num, pct, stageColor } from "./format.js";
import { tickStep, timeAxis, type SvgPart } from "./svg-part.js";
import type { MemoryCurve } from "./view-types.js";

const LEFT = 80;
const PLOT_W = 900;
const PLOT_H = 220;
const TOP = 40;
const LEGEND_LINE = 14;

/** The step curve as a path: horizontal to each change, then vertical to the new value. */
function curvePath(c: MemoryCurve, x: (t: number) => number, y: (b: number) => number, end: number): string {
  let d = `M${num(x(0))},${num(y(c.points[0]?.[1] ?? 0))}`;
  for (const [t, b] of c.points.slice(1)) d += `H${num(x(t))}V${num(y(b))}`;
  return `${d}H${num(x(end))}`;
}

export function memorySvg(curves: readonly MemoryCurve[], stepSeconds: number): SvgPart {
  const step = stepSeconds > 0 ? stepSeconds : 1;
  const capacity = curves[0]?.capacityBytes ?? 0;
  const most = Math.max(1, ...curves.map((c) => Math.max(c.arenaBytes, c.maxBytes)));
  // The capacity is drawn when it is on a readable scale; far above every arena (a CPU's RAM against a tiny
  // model) the curves would be flat at the bottom, so the note says where it is instead.
  const showCap = capacity > 0 && capacity <= most * 4;
  const top = (showCap ? Math.max(capacity, most) : most) * 1.08;
  const x = (t: number) => LEFT + (t * PLOT_W) / step;
  const y = (b: number) => TOP + PLOT_H - (b * PLOT_H) / top;
  const out: string[] = [`<text class="title" x="4" y="14">${esc(`memory per device over the predicted step (capacity ${formatBytes(capacity)})`)}</text>`];
  out.push(timeAxis(step, LEFT, PLOT_W, TOP - 4, TOP + PLOT_H));
  // Byte ticks step in whole binary units (10 GiB, 20 GiB), not decimal ones that print as 18.6 GiB.
  const unit = 1024 ** Math.max(0, Math.floor(Math.log(top) / Math.log(1024)));
  const yStep = tickStep(top / unit, 5) * unit;
  out.push('<g class="axis">');
  for (let i = 0; i * yStep <= top; i++) {
    const v = i * yStep;
    out.push(`<line x1="${LEFT - 4}" y1="${num(y(v))}" x2="${LEFT + PLOT_W}" y2="${num(y(v))}"/><text x="4" y="${num(y(v) + 3)}">${esc(formatBytes(v))}</text>`);
  }
  out.push("</g>");
  if (showCap) out.push(`<line class="cap" x1="${LEFT}" y1="${num(y(capacity))}" x2="${LEFT + PLOT_W}" y2="${num(y(capacity))}"><title>device capacity ${esc(formatBytes(capacity))}</title></line>`);
  else out.push(`<text x="${LEFT + 4}" y="${TOP + 10}">${esc(`capacity ${formatBytes(capacity)} is off the scale: the fullest arena uses ${pct(most / capacity)} of it`)}</text>`);
  curves.forEach((c, i) => {
    const color = stageColor(c.stages[0] ?? 0);
    const legendY = TOP + PLOT_H + 24 + i * LEGEND_LINE;
    const text = `${c.label}: peak ${formatBytes(c.planPeakBytes)}, arena ${formatBytes(c.arenaBytes)} (${pct(c.arenaBytes / c.capacityBytes)} of capacity)`;
    out.push(
      `<g class="memory" data-memory-program="${c.program}"><path class="curve" stroke="${color}" d="${curvePath(c, x, y, step)}"><title>${esc(text)}</title></path>` +
        `<rect x="${LEFT}" y="${legendY - 8}" width="12" height="8" fill="${color}"/><text x="${LEFT + 18}" y="${legendY}">${esc(text)}</text></g>`,
    );
  });
  const height = TOP + PLOT_H + 30 + curves.length * LEGEND_LINE;
  return { width: LEFT + PLOT_W + 20, height, body: `<g class="viz memory-chart">${out.join("")}</g>` };
}
