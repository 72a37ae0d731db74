// What every SVG drawing of viz shares: a drawn part (its size and inner markup), wrapping one as an <svg>
// element, the classes its markup uses (one stylesheet for the page and the standalone file), and the
// time axis both timelines and the memory chart use.
import { esc, formatSeconds, num } from "./format.js";

export interface SvgPart {
  readonly width: number;
  readonly height: number;
  /** Markup inside the <svg> element. */
  readonly body: string;
}

/** A part as a root or nested <svg> element; `attrs` e.g. ` class="timeline"` (leading space). */
export function svgElement(part: SvgPart, attrs = "", x?: number, y?: number): string {
  const at = x === undefined ? "" : ` x="${num(x)}" y="${num(y ?? 0)}"`;
  return `<svg xmlns="http://www.w3.org/2000/svg"${at} width="${num(part.width)}" height="${num(part.height)}" viewBox="0 0 ${num(part.width)} ${num(part.height)}"${attrs}>${part.body}</svg>`;
}

/** Styles of the classes the parts use (blocks by kind, idle stretches, axes, labels). */
export const SVG_CSS = `
.viz text{font:10px monospace;fill:#222}
.viz .title{font:bold 12px sans-serif}
.viz .axis line{stroke:#bbb;stroke-width:1}
.viz .axis text{fill:#666}
.viz .idle{fill:#f6d5d5}
.viz .b{stroke:#fff;stroke-width:.5}
.viz .backward,.viz .weight{fill-opacity:.62}
.viz .recompute{fill-opacity:.35;stroke:#333;stroke-dasharray:2 1}
.viz .send,.viz .recv{fill:#9aa0a6}
.viz .collective{fill:#8e6bbf}
.viz .optimizer{fill:#3c4043}
.viz .other{fill:#c0c0c0}
.viz .tp{fill-opacity:.55;stroke:#202124;stroke-width:.4}
.viz .lane-label{fill:#888}
.viz .box{stroke:#333;stroke-width:.6}
.viz .edge{fill:none;stroke:#555;stroke-width:1}
.viz .edge.cross{stroke-width:2.2}
.viz .cap{stroke:#c5221f;stroke-dasharray:6 3;stroke-width:1.2}
.viz .curve{fill:none;stroke-width:1.4}
`;

/** 1, 2 or 5 times a power of ten: about `want` ticks over [0, span]. */
export function tickStep(span: number, want: number): number {
  if (!(span > 0)) return 1;
  const raw = span / want;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/** A time axis from 0 to `seconds` drawn `width` px wide from `x0`, labels above `y`, grid lines down to `y1`. */
export function timeAxis(seconds: number, x0: number, width: number, y: number, y1: number): string {
  const step = tickStep(seconds, 8);
  const out: string[] = ['<g class="axis">'];
  for (let i = 0; i * step <= seconds * (1 + 1e-9); i++) {
    const x = x0 + (i * step * width) / seconds;
    out.push(`<line x1="${num(x)}" y1="${num(y)}" x2="${num(x)}" y2="${num(y1)}"/><text x="${num(x + 2)}" y="${num(y - 3)}">${esc(i === 0 ? "0" : formatSeconds(i * step))}</text>`);
  }
  out.push("</g>");
  return out.join("");
}
