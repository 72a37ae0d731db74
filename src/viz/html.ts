// `fsm viz` (HTML, the default): one self-contained page — inline CSS, SVG and a few lines of script, no
// fonts, images or scripts from the network — with the summary, stage table, graph, shard map, timelines,
// memory chart and alternatives. Deterministic: the same plan and trace give the same bytes.
import { esc } from "./format.js";
import { alternativesHtml, layerTableHtml, shardMapHtml, stageTableHtml, summaryHtml } from "./html-tables.js";
import { timelineParts } from "./svg.js";
import { graphSvg } from "./svg-graph.js";
import { memorySvg } from "./svg-memory.js";
import { SVG_CSS, svgElement } from "./svg-part.js";
import type { ViewModel } from "./view-types.js";

const PAGE_CSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 40px;color:#202124}
h1{font-size:20px;margin:18px 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}h3{font-size:14px}
.settings{color:#555;margin:0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.cards div{border:1px solid #ddd;border-radius:6px;padding:6px 10px;min-width:140px}
.cards dt{font-size:12px;color:#666}.cards dd{margin:0;font-weight:600}
table{border-collapse:collapse;font-size:12px;margin:4px 0}
td,th{border:1px solid #e0e0e0;padding:2px 6px;text-align:left;vertical-align:top}
table.num td{font-variant-numeric:tabular-nums}
tr.chosen{background:#e6f4ea}
.sw{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.scroll{overflow-x:auto;border:1px solid #eee}
details.shard{margin:4px 0}
.legend span{margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle;border:1px solid #ccc}
.viz .hl{stroke:#000;stroke-width:1.6}
`;

/** Hovering a block outlines every block of the same micro-batch in that timeline (following one through the
 *  pipeline); hover details themselves are the SVG <title>s, which need no script. */
const SCRIPT = `
(function () {
  var lit = [];
  document.addEventListener("mouseover", function (e) {
    for (var i = 0; i < lit.length; i++) lit[i].classList.remove("hl");
    lit = [];
    var t = e.target;
    if (!t || !t.getAttribute) return;
    var mb = t.getAttribute("data-mb");
    var svg = t.closest ? t.closest("svg") : null;
    if (mb === null || !svg) return;
    var all = svg.querySelectorAll('[data-mb="' + mb + '"]');
    for (var j = 0; j < all.length; j++) { all[j].classList.add("hl"); lit.push(all[j]); }
  });
})();
`;

const LEGEND: readonly [string, string][] = [
  ["forward (stage color)", "background:#4a90d9"],
  ["backward / weight gradient (lighter)", "background:#4a90d9;opacity:.62"],
  ["recompute (dashed)", "background:#4a90d9;opacity:.35;border:1px dashed #333"],
  ["send / receive", "background:#9aa0a6"],
  ["collective", "background:#8e6bbf"],
  ["optimizer", "background:#3c4043"],
  ["idle (bubble)", "background:#f6d5d5"],
];

/** Tensor-parallel plans only: the hatched end of a predicted compute block (svg-timeline.ts). */
const TP_LEGEND: readonly [string, string] = [
  "tensor-parallel collectives inside compute (their cost-model time, drawn at the block's end)",
  "background:repeating-linear-gradient(45deg,#202124 0 1px,#fff 1px 3px)",
];

function legendHtml(vm: ViewModel): string {
  const entries = vm.summary.tensorParallel > 1 ? [...LEGEND, TP_LEGEND] : LEGEND;
  return `<p class="legend">${entries.map(([name, style]) => `<span><i style="${style}"></i>${esc(name)}</span>`).join("")}</p>`;
}

export function renderHtml(vm: ViewModel): string {
  const timelines = timelineParts(vm).map((p, i) => `<div class="scroll">${svgElement(p, ` class="timeline-svg" data-timeline="${i === 0 ? "predicted" : "measured"}"`)}</div>`);
  const rows = vm.predicted.rows.length;
  const who = vm.summary.tensorParallel > 1 ? "Data-parallel replicas and the ranks of their tensor-parallel groups" : "Data-parallel replicas";
  const aggregated = vm.summary.devices > rows ? ` ${who} run the same actions, so each row stands for its ranks (${vm.summary.devices} devices in ${rows} rows).` : "";
  const measuredNote = vm.measured ? " The measured step is drawn below the predicted one on the same time scale." : "";
  const sections = [
    `<header><h1>${esc(vm.title)}</h1><p class="settings">${esc(vm.settings)}</p></header>`,
    `<section id="summary">${summaryHtml(vm)}</section>`,
    `<section id="stages"><h2>Stages</h2><p>Per step; FLOPs and compute time per device of the stage.</p>${stageTableHtml(vm)}</section>`,
    `<section id="graph"><h2>Model graph by pipeline stage</h2><div class="scroll">${svgElement(graphSvg(vm), ' class="graph-svg"')}</div>` +
      `<h3>Layers (repeated blocks collapsed: open one to list its layers)</h3>${layerTableHtml(vm)}</section>`,
    `<section id="shards"><h2>Shard map</h2><p>Model state each rank holds: weights, gradients, optimizer state.</p>${shardMapHtml(vm)}</section>`,
    `<section id="timeline"><h2>Schedule timeline</h2><p>One row per program: a compute lane and a communication lane; hover a block for details, and to outline its micro-batch everywhere.${aggregated}${measuredNote}</p>${legendHtml(vm)}${timelines.join("")}</section>`,
    `<section id="memory"><h2>Memory per device</h2><div class="scroll">${svgElement(memorySvg(vm.memory, vm.predicted.stepSeconds), ' class="memory-svg"')}</div></section>`,
    `<section id="alternatives"><h2>Alternatives considered</h2>${alternativesHtml(vm)}</section>`,
  ];
  return (
    `<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${esc(`fsm viz: ${vm.title}`)}</title><style>${PAGE_CSS}${SVG_CSS}</style></head>\n<body>\n${sections.join("\n")}\n<script>${SCRIPT}</script>\n</body></html>\n`
  );
}
