// Matches call arguments to named slots (positional first, then keywords), as Python does, reporting
// unknown (FSM303), repeated (FSM306), missing (FSM304) and surplus (FSM305) arguments at their spans.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type { Arg, Expr } from "../parse/ast.js";
import { didYouMean } from "./suggest.js";

export interface Slot {
  readonly name: string;
  readonly required: boolean;
}

/** Slot name → the argument's expression; undefined when binding failed (diagnostics pushed). */
export function bindArgs(
  diags: Diagnostic[],
  what: string,
  slots: readonly Slot[],
  args: readonly Arg[],
  callSpan: Span,
): Map<string, Expr> | undefined {
  const bound = new Map<string, Expr>();
  let ok = true;
  let positional = 0;
  for (const a of args) {
    if (!a.name) {
      const slot = slots[positional++];
      if (!slot) {
        diags.push(error("FSM305", `${what} takes at most ${slots.length} argument${slots.length === 1 ? "" : "s"}`, a.span));
        ok = false;
        continue;
      }
      bound.set(slot.name, a.value);
      continue;
    }
    const slot = slots.find((s) => s.name === a.name!.name);
    if (!slot) {
      diags.push(error("FSM303", `${what} has no argument '${a.name.name}'`, a.name.span, didYouMean(a.name.name, slots.map((s) => s.name))));
      ok = false;
    } else if (bound.has(slot.name)) {
      diags.push(error("FSM306", `argument '${slot.name}' of ${what} is given twice`, a.name.span));
      ok = false;
    } else bound.set(slot.name, a.value);
  }
  for (const s of slots) {
    if (s.required && !bound.has(s.name)) {
      diags.push(error("FSM304", `${what} needs argument '${s.name}'`, callSpan));
      ok = false;
    }
  }
  return ok ? bound : undefined;
}
