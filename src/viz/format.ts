// Shared formatting for every viz renderer: rank ranges, percentages, SVG numbers, escaping and the stage
// palette. Fixed precision everywhere, so the same plan always renders to the same bytes.
export { tableLines } from "../format/table.js";
export { count, formatBytes, formatFlops, formatSeconds } from "../format/units.js";

/** `0-31`, `0-3, 8-11`, `5`: consecutive runs joined, so 1024 ranks stay one short phrase. */
export function rankText(ranks: readonly number[]): string {
  const parts: string[] = [];
  let i = 0;
  while (i < ranks.length) {
    let j = i;
    while (j + 1 < ranks.length && ranks[j + 1] === ranks[j]! + 1) j++;
    parts.push(j === i ? `${ranks[i]}` : `${ranks[i]}-${ranks[j]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

/** `ranks 0-31` or `rank 2`: the label of a timeline row or memory curve standing for these ranks. */
export function ranksLabel(ranks: readonly number[]): string {
  return `${ranks.length > 1 ? "ranks" : "rank"} ${rankText(ranks)}`;
}

/** `1 node`, `2 nodes`, `3 micro-batches`. */
export function plural(n: number, word: string): string {
  return `${n} ${n === 1 ? word : word.endsWith("h") ? `${word}es` : `${word}s`}`;
}

/** A stage's layers: `wte .. layers.0 (0-2)`, or `head (5)` for one layer. */
export function stageLayers(st: { readonly firstLayer: string; readonly lastLayer: string; readonly layers: readonly [number, number] }): string {
  const [a, b] = st.layers;
  return a === b ? `${st.firstLayer} (${a})` : `${st.firstLayer} .. ${st.lastLayer} (${a}-${b})`;
}

/** `71.4%`; a tiny share (a small model in a large memory) reads `<0.1%` rather than a misleading `0.0%`. */
export function pct(fraction: number): string {
  if (fraction > 0 && fraction < 0.0005) return "<0.1%";
  return `${(fraction * 100).toFixed(1)}%`;
}

/** An SVG coordinate: one decimal, no trailing `.0`, no `-0` (smaller files, stable bytes). */
export function num(x: number): string {
  const r = Math.round(x * 10) / 10;
  return Object.is(r, -0) ? "0" : String(r);
}

/** Text for XML/HTML content and attribute values. */
export function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function hslHex(h: number, s: number, l: number): string {
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) => {
    const k = (n + h / 30) % 12;
    const v = l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(v * 255).toString(16).padStart(2, "0");
  };
  return `#${f(0)}${f(8)}${f(4)}`;
}

/** Stage k's hue: a golden angle from the previous stage's. */
function stageHue(k: number): number {
  return (k * 137.508 + 210) % 360;
}

/**
 * Stage k's color as #rrggbb (CSS, SVG and Graphviz all read it): hues a golden angle apart, so
 * neighbouring stages never look alike however many stages a plan has (a fixed list would repeat).
 */
export function stageColor(k: number): string {
  return hslHex(stageHue(k), 0.62, k % 2 === 0 ? 0.6 : 0.5);
}

/** A pale version of stage k's color, for backgrounds behind text. */
export function stageFill(k: number): string {
  return hslHex(stageHue(k), 0.62, 0.9);
}
