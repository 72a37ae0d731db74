// Load-time check that the plan's training graph is one the compiler could have built: rebuilt from its JSON
// and put through the same invariants every compiler pass keeps (graph/verify.ts), so that an edited tensor
// shape, dtype or operand shows up as the op whose recorded output no longer follows from its inputs, rather
// than as a kernel fed a buffer of the wrong size.
import type { AttrSpec } from "../graph/op-def.js";
import { getOp } from "../graph/registry.js";
import { verifyGraph } from "../graph/verify.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import { fail } from "../plan/json-check.js";
import { PlanError } from "../plan/plan-error.js";
import type { Plan } from "../plan/plan.js";

/** Throws PlanError at the first broken invariant; the plan has passed validatePlan (ids are in range). */
export function checkGraphShapes(plan: Plan): void {
  plan.graph.ops.forEach((o, i) => {
    const def = getOp(o.op);
    const wrong = def && attributeProblem(def.attrs, o.attrs ?? {});
    if (wrong) fail(`graph.ops[${i}].attrs.${wrong.name}`, `${o.op}: ${wrong.message}`);
  });
  let problems: string[];
  try {
    problems = verifyGraph(graphFromJson(plan.model.name, plan.graph));
  } catch (e) {
    if (e instanceof PlanError) throw e;
    // The graph builder's own consistency checks (an op's operands, a parameter's layer) throw plain errors.
    fail("graph", (e as Error).message);
  }
  const first = problems[0];
  if (first !== undefined) fail(graphPath(first), problems.length === 1 ? first : `${first} (and ${problems.length - 1} more)`);
}

/** The first attribute missing or of the wrong type. A compiled graph carries every attribute with a constant
 *  default (the checker fills them in), so a missing one is an edited plan, which kernels must never see. */
function attributeProblem(specs: readonly AttrSpec[], attrs: Readonly<Record<string, unknown>>): { name: string; message: string } | undefined {
  for (const s of specs) {
    const v = attrs[s.name];
    if (v === undefined) {
      if (s.optional) continue;
      return { name: s.name, message: `attribute '${s.name}' is missing` };
    }
    const ok =
      s.type === "int" ? Number.isInteger(v) :
      s.type === "float" ? typeof v === "number" && Number.isFinite(v) :
      s.type === "bool" ? typeof v === "boolean" :
      s.type === "str" ? typeof v === "string" :
      s.type === "enum" ? typeof v === "string" && (s.values ?? []).includes(v) :
      true;
    const want = s.type === "enum" ? `one of ${(s.values ?? []).join(", ")}` : s.type === "int" ? "an integer" : `a ${s.type}`;
    if (!ok) return { name: s.name, message: `attribute '${s.name}' must be ${want}, got ${JSON.stringify(v)}` };
  }
  return undefined;
}

/** The JSON path verifyGraph's message is about: its op, or the graph section it names. */
export function graphPath(message: string): string {
  const op = /^op (\d+)\b/.exec(message);
  if (op) return `graph.ops[${op[1]}]`;
  const sections: [RegExp, string][] = [
    [/^parameter |^alias /, "graph.params"],
    [/^gradient /, "graph.paramGrads"],
    [/^state /, "graph.states"],
    [/^update /, "graph.updates"],
    [/^the loss /, "graph.loss"],
    [/^layer /, "graph.layers"],
    [/cycle/, "graph.ops"],
  ];
  return sections.find(([re]) => re.test(message))?.[1] ?? "graph.tensors";
}
