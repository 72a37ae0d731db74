// Loading a plan for a command: the validating loader, with an invalid plan reported the one way every
// command reports it (`FILE: error: invalid plan: PATH: reason`, exit 1).
import { loadPlan } from "../verify/load.js";
import { PlanError } from "../plan/plan-error.js";
import type { Plan } from "../plan/plan.js";
import type { CliIO } from "./io.js";

/** The plan at `file`, or undefined after reporting why it cannot be used (the command then exits 1). */
export function loadPlanOrReport(file: string, io: CliIO): Plan | undefined {
  try {
    return loadPlan(file);
  } catch (e) {
    if (!(e instanceof PlanError)) throw e;
    io.stderr(`${file}: error: invalid plan: ${e.message}\n`);
    return undefined;
  }
}
