// `fsm viz --format svg`: one standalone SVG document — the partitioned graph, the predicted timeline (and the
// measured one on the same time scale), and memory per device — stacked top to bottom.
import { graphSvg } from "./svg-graph.js";
import { memorySvg } from "./svg-memory.js";
import { SVG_CSS, svgElement, type SvgPart } from "./svg-part.js";
import { timelineSvg } from "./svg-timeline.js";
import type { ViewModel } from "./view-types.js";

const GAP = 24;

/** The timelines drawn at one scale: the longer of the predicted and measured step. */
export function timelineParts(vm: ViewModel): SvgPart[] {
  const scale = Math.max(vm.predicted.stepSeconds, vm.measured?.stepSeconds ?? 0);
  return [timelineSvg(vm.predicted, scale), ...(vm.measured ? [timelineSvg(vm.measured, scale)] : [])];
}

export function renderSvg(vm: ViewModel): string {
  const parts = [graphSvg(vm), ...timelineParts(vm), memorySvg(vm.memory, vm.predicted.stepSeconds)];
  let y = 0;
  const nested: string[] = [];
  for (const p of parts) {
    nested.push(svgElement(p, "", 0, y));
    y += p.height + GAP;
  }
  const width = Math.max(...parts.map((p) => p.width));
  const body = `<style>${SVG_CSS}</style><rect width="100%" height="100%" fill="#fff"/>${nested.join("")}`;
  return `<?xml version="1.0" encoding="UTF-8"?>\n${svgElement({ width, height: y - GAP, body })}\n`;
}
