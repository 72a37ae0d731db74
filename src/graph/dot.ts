// Graphviz DOT export of a graph (`fsm graph --dot`): one cluster per layer, op nodes labeled with op and
// output type, edges labeled with the shape that flows. Parameters are left out unless asked for, since a
// large model would otherwise drown its ops in weight nodes.
import { shapeToString } from "./dim.js";
import type { Graph, TensorId } from "./graph.js";
import { typeToString } from "./types-format.js";

export interface DotOptions {
  /** Draw each parameter as a small node next to its first consumer's cluster. Default false. */
  readonly params?: boolean;
}

/** A DOT double-quoted string: backslashes and quotes escaped, newlines as DOT's `\n`. */
function q(s: string): string {
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
}

export function graphToDot(g: Graph, options: DotOptions = {}): string {
  const showParams = options.params ?? false;
  const lines: string[] = [
    `digraph ${q(g.model)} {`,
    "  rankdir=TB;",
    '  node [shape=box, fontname="monospace", fontsize=10];',
    '  edge [fontname="monospace", fontsize=8];',
  ];
  const source = (t: TensorId): string | undefined => {
    if (!g.hasTensor(t)) return undefined;
    const info = g.tensor(t);
    if (info.producer !== undefined) return `op${info.producer}`;
    if (info.kind === "input") return `in${t}`;
    return showParams ? `p${t}` : undefined;
  };

  for (const t of g.inputs()) {
    const info = g.tensor(t);
    lines.push(`  in${t} [label=${q(`${info.name}\n${typeToString(info.type)}`)}, shape=ellipse];`);
  }
  for (const l of g.layers()) {
    lines.push(`  subgraph cluster_${l.index} {`, `    label=${q(`layer ${l.index}: ${l.name}`)};`);
    if (showParams) {
      for (const name of l.params) {
        const p = g.param(name)!;
        lines.push(`    p${p.tensor} [label=${q(`${p.name}\n${typeToString(p.type)}`)}, shape=note, fontsize=8];`);
      }
    }
    for (const id of l.ops) {
      const o = g.op(id);
      const types = o.outputs.filter((t) => g.hasTensor(t)).map((t) => typeToString(g.tensor(t).type)).join(", ");
      lines.push(`    op${id} [label=${q(`${o.op}\n${types}`)}, tooltip=${q(o.scope)}];`);
    }
    lines.push("  }");
  }
  for (const o of g.ops()) {
    for (const t of o.inputs) {
      const from = source(t);
      if (from) lines.push(`  ${from} -> op${o.id} [label=${q(shapeToString(g.tensor(t).type.shape))}];`);
    }
  }
  const loss = g.loss;
  if (loss !== undefined && g.hasTensor(loss)) {
    lines.push(`  loss [label=${q(`loss\n${typeToString(g.tensor(loss).type)}`)}, shape=doublecircle];`);
    const from = source(loss);
    if (from) lines.push(`  ${from} -> loss;`);
  }
  lines.push("}");
  return lines.join("\n") + "\n";
}
