// Reading a plan: parse, then validate every field and reference (validate.ts); any problem is a PlanError.
import { readFileSync } from "node:fs";
import { PlanError } from "./plan-error.js";
import type { Plan } from "./plan.js";
import { validatePlan } from "./validate.js";

/** Parses and validates plan JSON text. */
export function parsePlan(text: string): Plan {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new PlanError("", `not valid JSON: ${(e as Error).message}`);
  }
  return validatePlan(value);
}

export function loadPlan(path: string): Plan {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new PlanError("", `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return parsePlan(text);
}
