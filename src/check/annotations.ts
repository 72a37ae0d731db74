// Reads `@stage(k)`, `@checkpoint` and `@fsdp_unit` annotations on blocks and members.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Annotation } from "../parse/ast.js";
import { evalExpr } from "./const-eval.js";
import type { Env } from "./env.js";
import type { Annotations } from "./instances.js";
import { didYouMean } from "./suggest.js";
import { describe } from "./values.js";

export const ANNOTATION_NAMES = ["stage", "checkpoint", "fsdp_unit"] as const;

export function readAnnotations(diags: Diagnostic[], list: readonly Annotation[], env: Env): Annotations {
  let out: Annotations = {};
  for (const a of list) {
    const name = a.name.name;
    if (name === "checkpoint" || name === "fsdp_unit") {
      if (a.args.length > 0) {
        diags.push(error("FSM305", `@${name} takes no arguments`, a.args[0]!.span));
        continue;
      }
      out = name === "checkpoint" ? { ...out, checkpoint: true } : { ...out, fsdpUnit: true };
    } else if (name === "stage") {
      const arg = a.args[0];
      if (a.args.length !== 1 || !arg || arg.name) {
        diags.push(error("FSM305", "@stage takes one argument, the stage index: @stage(0)", a.span));
        continue;
      }
      const v = evalExpr({ diags }, arg.value, env);
      if (v.k === "error") continue;
      if (v.k !== "int" || v.v < 0) {
        diags.push(error("FSM505", `@stage needs a stage index >= 0, got ${describe(v)}`, arg.value.span));
        continue;
      }
      out = { ...out, stage: v.v, stageSpan: a.span };
    } else {
      diags.push(error("FSM313", `unknown annotation '@${name}'`, a.name.span, didYouMean(name, ANNOTATION_NAMES)));
    }
  }
  return out;
}
