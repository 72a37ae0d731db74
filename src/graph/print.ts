// The stable text form of a graph (`fsm graph`, golden tests): inputs, then each layer's parameters and forward
// ops one per line, then the loss; a training graph then lists its optimizer state, one section per further
// phase, the gradients and the updates. Parameters and state appear by name, inputs as %name, others as %id.
import { numel } from "./dim.js";
import { PHASES, type Graph, type LayerAnnotations, type OpNode, type TensorId } from "./graph.js";
import { getOp } from "./registry.js";
import { attrToString, groupDigits, typeToString } from "./types-format.js";

export function operandToString(g: Graph, t: TensorId): string {
  if (!g.hasTensor(t)) return `%?${t}`;
  const info = g.tensor(t);
  if (info.kind === "param" || info.kind === "state") return info.name;
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
    for (const id of l.ops) if (g.op(id).phase === "forward") lines.push(`  ${opToString(g, g.op(id))}`);
  }
  const loss = g.loss;
  lines.push(loss === undefined ? "loss <unset>" : `loss ${operandToString(g, loss)} : ${g.hasTensor(loss) ? typeToString(g.tensor(loss).type) : "?"}`);
  if (g.isTraining()) for (const line of trainingSections(g)) lines.push(line);
  return lines.join("\n") + "\n";
}

/** The training part: state, then each non-forward phase's ops as `[layer] op  ← forward op`, gradients, updates. */
function trainingSections(g: Graph): string[] {
  const lines: string[] = [];
  for (const s of g.states()) lines.push(`state ${s.name} : ${typeToString(s.type)} = zeros${s.param ? `  (${s.role} of ${s.param})` : ""}`);
  for (const phase of PHASES.filter((p) => p !== "forward")) {
    const ops = g.ops().filter((o) => o.phase === phase);
    if (ops.length === 0) continue;
    lines.push(`phase ${phase}  [ops: ${groupDigits(ops.length)}]`);
    for (const o of ops) lines.push(`  [${o.layer}] ${opToString(g, o)}${o.forwardOp === undefined ? "" : `  <- op ${o.forwardOp}`}`);
  }
  for (const [name, t] of g.paramGrads()) lines.push(`grad ${name} = ${operandToString(g, t)}`);
  for (const [target, value] of g.updates()) lines.push(`update ${operandToString(g, target)} <- ${operandToString(g, value)}`);
  return lines;
}
