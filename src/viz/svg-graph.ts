// The partitioned model graph as SVG: one panel per stage in its color (a grid, pipeline order left to right
// and on down), one box per layer group in layer order, data-flow edges between boxes.
import { count, esc, formatBytes, formatFlops, num, rankText, stageColor, stageFill } from "./format.js";
import type { SvgPart } from "./svg-part.js";
import type { GroupEdge, LayerGroup, ViewModel } from "./view-types.js";

const BOX_W = 220;
const BOX_H = 30;
const BOX_GAP = 10;
const PANEL_W = BOX_W + 40;
const PANEL_HEAD = 34;
const PANEL_GAP_X = 40;
const PANEL_GAP_Y = 24;
const COLUMNS = 6;
const TOP = 24;
const CHAR_W = 6.1;

interface Placed {
  readonly x: number;
  readonly y: number;
  /** Grid row of its panel. */
  readonly row: number;
}

function fit(text: string, width: number): string {
  const max = Math.floor(width / CHAR_W);
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function groupDetails(g: LayerGroup): string {
  const parts = [`${g.label}: layers ${g.first}-${g.last} on stage ${g.stage}`, `${count(g.parameters)} parameters`, `${formatFlops(g.flops)} per micro-batch`];
  if (g.units.length > 0) parts.push(`FSDP units ${rankText(g.units)}`);
  if (g.tied.length > 0) parts.push(`tied: ${g.tied.join(", ")}`);
  if (g.names.length > 1) parts.push(`layers: ${g.names.join(", ")}`);
  return parts.join("; ");
}

/**
 * One data-flow edge: straight down to the next box of a panel, a curve around the boxes in between, a curve
 * across to the next panel of a grid row; an edge that wraps to the next grid row would cross every panel,
 * so it is two labelled stubs instead.
 */
function edgeMarkup(e: GroupEdge, a: Placed, b: Placed, toStage: number, fromStage: number): string {
  const ya = a.y + BOX_H / 2;
  const yb = b.y + BOX_H / 2;
  let d: string;
  if (!e.crossStage && e.to === e.from + 1) d = `M${num(a.x + BOX_W / 2)},${num(a.y + BOX_H)}V${num(b.y)}`;
  else if (!e.crossStage) d = `M${num(a.x)},${num(ya)}C${num(a.x - 16)},${num(ya)} ${num(b.x - 16)},${num(yb)} ${num(b.x)},${num(yb)}`;
  else if (b.row === a.row && b.x > a.x) d = `M${num(a.x + BOX_W)},${num(ya)}C${num(a.x + BOX_W + 40)},${num(ya)} ${num(b.x - 40)},${num(yb)} ${num(b.x)},${num(yb)}`;
  else {
    return (
      `<path class="edge cross" d="M${num(a.x + BOX_W)},${num(ya)}h14"/><text x="${num(a.x + BOX_W + 2)}" y="${num(ya - 4)}">${toStage}</text>` +
      `<path class="edge cross" d="M${num(b.x - 14)},${num(yb)}h14"/><text x="${num(b.x - 14)}" y="${num(yb - 4)}">${fromStage}</text>`
    );
  }
  return `<path class="edge${e.crossStage ? " cross" : ""}" d="${d}"/>`;
}

export function graphSvg(vm: ViewModel): SvgPart {
  const columns = Math.min(COLUMNS, vm.stages.length);
  const perStage = vm.stages.map((st) => vm.layerGroups.map((g, i) => [g, i] as const).filter(([g]) => g.stage === st.stage));
  const panelH = perStage.map((gs) => PANEL_HEAD + gs.length * (BOX_H + BOX_GAP));
  const rows = Math.ceil(vm.stages.length / columns);
  const rowY: number[] = [TOP];
  for (let r = 0; r < rows; r++) rowY.push(rowY[r]! + Math.max(...panelH.slice(r * columns, (r + 1) * columns)) + PANEL_GAP_Y);
  const boxAt: Placed[] = [];
  const panels: string[] = [];
  vm.stages.forEach((st, k) => {
    const px = 10 + (k % columns) * (PANEL_W + PANEL_GAP_X);
    const py = rowY[Math.floor(k / columns)]!;
    const head = `stage ${st.stage}: ranks ${rankText(st.ranks)}`;
    const sub = `${count(st.parameters)} params, arena ${formatBytes(st.arenaBytes)}`;
    const boxes = perStage[k]!.map(([g, i], j) => {
      const x = px + 20;
      const y = py + PANEL_HEAD + j * (BOX_H + BOX_GAP);
      boxAt[i] = { x, y, row: Math.floor(k / columns) };
      const note = [`${count(g.parameters)} params`, ...(g.units.length > 0 ? [`unit ${rankText(g.units)}`] : []), ...(g.tied.length > 0 ? ["tied"] : [])].join(", ");
      return (
        `<g class="layer-group" data-group="${i}"><rect class="box" x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="4" fill="${stageColor(st.stage)}"><title>${esc(groupDetails(g))}</title></rect>` +
        `<text x="${x + 5}" y="${y + 12}" pointer-events="none">${esc(fit(g.label, BOX_W - 8))}</text>` +
        `<text x="${x + 5}" y="${y + 25}" pointer-events="none">${esc(fit(note, BOX_W - 8))}</text></g>`
      );
    });
    panels.push(
      `<g class="stage-cluster" data-stage="${st.stage}"><rect x="${px}" y="${py}" width="${PANEL_W}" height="${panelH[k]}" rx="8" fill="${stageFill(st.stage)}" stroke="${stageColor(st.stage)}"/>` +
        `<text x="${px + 8}" y="${py + 14}" font-weight="bold">${esc(fit(head, PANEL_W - 12))}</text><text x="${px + 8}" y="${py + 27}">${esc(fit(sub, PANEL_W - 12))}</text>` +
        boxes.join("") +
        "</g>",
    );
  });
  const edges = vm.edges.map((e) => edgeMarkup(e, boxAt[e.from]!, boxAt[e.to]!, vm.layerGroups[e.to]!.stage, vm.layerGroups[e.from]!.stage));
  const width = 20 + columns * (PANEL_W + PANEL_GAP_X);
  const title = `<text class="title" x="10" y="16">${esc(`${vm.title}: layers by pipeline stage (repeated blocks collapsed)`)}</text>`;
  return { width, height: rowY[rows]!, body: `<g class="viz graph">${title}${panels.join("")}<g class="edges">${edges.join("")}</g></g>` };
}
