// The stable text form of a graph (`fsm graph`, golden tests): inputs, then each layer's parameters and ops
// one per line, then the loss. Parameters appear by name, inputs as %name, activations as %id.
import { numel } from "./dim.js";
import type { Graph, LayerAnnotations, OpNode, TensorId } from "./graph.js";
import { getOp } from "./registry.js";
import { attrToString, groupDigits, typeToString } from "./types-format.js";

export function operandToString(g: Graph, t: TensorId): string {
  if (!g.hasTensor(t)) return `%?${t}`;
  const info = g.tensor(t);
  if (info.kind === "param") return info.name;
  if (info.kind === "input") return `%${info.name}`;
  return `%${t}`;
}

/** `{in: 768, out: 3072, bias: true}` in the op's declared attribute order (unknown keys after, sorted). */
export function attrsToString(o: Pick<OpNode, "op" | "attrs">): string {
  const specs = getOp(o.op)?.attrs ?? [];
  const parts: string[] = [];
  const seen = new Set<string>();
  for (const s of specs) {
    const v = o.attrs[s.name];
    seen.add(s.name);
    if (v !== undefined) parts.push(`${s.name}: ${attrToString(v, s.type)}`);
  }
  for (const k of Object.keys(o.attrs).sort()) {
    const v = o.attrs[k];
    if (!seen.has(k) && v !== undefined) parts.push(`${k}: ${attrToString(v)}`);
  }
  return parts.length === 0 ? "" : ` {${parts.join(", ")}}`;
}

export function opToString(g: Graph, o: OpNode): string {
  const outs = o.outputs.map((t) => `%${t}`).join(", ");
  const args = o.inputs.map((t) => operandToString(g, t)).join(", ");
  const types = o.outputs.map((t) => (g.hasTensor(t) ? typeToString(g.tensor(t).type) : "?")).join(", ");
  const scope = o.scope ? `  # ${o.scope}` : "";
  return `${outs} = ${o.op}(${args})${attrsToString(o)} : ${types}${scope}`;
}

export function annotationsToString(a: LayerAnnotations): string {
  const parts: string[] = [];
  if (a.stage !== undefined) parts.push(`@stage(${a.stage})`);
  if (a.checkpoint) parts.push("@checkpoint");
  if (a.fsdpUnit) parts.push("@fsdp_unit");
  return parts.join(" ");
}

/** Sum of the element counts of the parameters declared in each layer (tied ones in their owner's layer). */
export function layerParameterCounts(g: Graph): number[] {
  return g.layers().map((l) => l.params.reduce((n, name) => n + numel(g.param(name)!.type.shape), 0));
}

export function printGraph(g: Graph): string {
  const lines: string[] = [`model ${g.model}  (${groupDigits(g.parameterCount())} parameters)`];
  for (const t of g.inputs()) lines.push(`input %${g.tensor(t).name} : ${typeToString(g.tensor(t).type)}`);
  const counts = layerParameterCounts(g);
  for (const l of g.layers()) {
    const ann = annotationsToString(l.annotations);
    lines.push(`layer ${l.index} ${l.name}  [params: ${groupDigits(counts[l.index]!)}]${ann ? `  ${ann}` : ""}`);
    for (const name of l.params) {
      const p = g.param(name)!;
      const tied = p.aliases.length > 0 ? `  (tied: ${p.aliases.join(", ")})` : "";
      lines.push(`  param ${p.name} : ${typeToString(p.type)} = ${p.init}${tied}`);
    }
    for (const id of l.ops) lines.push(`  ${opToString(g, g.op(id))}`);
  }
  const loss = g.loss;
  lines.push(loss === undefined ? "loss <unset>" : `loss ${operandToString(g, loss)} : ${g.hasTensor(loss) ? typeToString(g.tensor(loss).type) : "?"}`);
  return lines.join("\n") + "\n";
}
