// Load-time check that the plan's training graph is one the compiler could have built: rebuilt from its JSON
// and put through the same invariants every compiler pass keeps (graph/verify.ts), so that an edited tensor
// shape, dtype or operand shows up as the op whose recorded output no longer follows from its inputs, rather
// than as a kernel fed a buffer of the wrong size.
import { verifyGraph } from "../graph/verify.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import { fail } from "../plan/json-check.js";
import { PlanError } from "../plan/plan-error.js";
import type { Plan } from "../plan/plan.js";

/** Throws PlanError at the first broken invariant; the plan has passed validatePlan (ids are in range). */
export function checkGraphShapes(plan: Plan): void {
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
