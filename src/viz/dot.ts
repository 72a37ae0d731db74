// `fsm viz --format dot`: the partitioned model graph in Graphviz DOT — one cluster per pipeline stage in its
// color, one node per layer group (repeated blocks collapsed), the forward data flow as edges, bold where it
// crosses stages (a pipeline send).
import { count, formatBytes, formatFlops, rankText, stageColor, stageFill } from "./format.js";
import type { LayerGroup, ViewModel } from "./view-types.js";

/** A DOT double-quoted string: backslashes and quotes escaped, newlines as DOT's `\n`. */
function q(s: string): string {
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
}

function nodeLabel(g: LayerGroup): string {
  const lines = [g.label, `${count(g.parameters)} params, ${formatFlops(g.flops)}/mb`];
  if (g.units.length > 0) lines.push(`FSDP unit${g.units.length === 1 ? "" : "s"} ${rankText(g.units)}`);
  for (const t of g.tied) lines.push(`tied ${t}`);
  return lines.join("\n");
}

export function renderDot(vm: ViewModel): string {
  const lines = [
    `digraph ${q(vm.summary.model)} {`,
    `  label=${q(`${vm.title}\n${vm.settings}`)};`,
    "  labelloc=t;",
    "  rankdir=TB;",
    '  fontname="monospace";',
    '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
    '  edge [fontname="monospace", fontsize=8];',
  ];
  for (const st of vm.stages) {
    const label = `stage ${st.stage} (pipeline rank ${st.pipeRank}): ranks ${rankText(st.ranks)}\n${count(st.parameters)} params, arena ${formatBytes(st.arenaBytes)}`;
    lines.push(`  subgraph cluster_stage${st.stage} {`);
    lines.push(`    label=${q(label)};`, '    style="rounded,filled";', `    color=${q(stageColor(st.stage))};`, `    fillcolor=${q(stageFill(st.stage))};`);
    vm.layerGroups.forEach((g, i) => {
      if (g.stage === st.stage) lines.push(`    g${i} [label=${q(nodeLabel(g))}, fillcolor=${q(stageColor(st.stage))}];`);
    });
    lines.push("  }");
  }
  for (const e of vm.edges) {
    const from = vm.layerGroups[e.from]!.stage;
    const to = vm.layerGroups[e.to]!.stage;
    const style = e.crossStage ? ` [style=bold, penwidth=2, label=${q(`stage ${from} -> ${to}`)}]` : "";
    lines.push(`  g${e.from} -> g${e.to}${style};`);
  }
  lines.push("}");
  return lines.join("\n") + "\n";
}
