// Reading a plan: parse, then validate every field and reference (validate.ts); any problem is a PlanError.
import { closeSync, readFileSync } from "node:fs";
import { openRegularFile, PathError } from "../files/path-kind.js";
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
    // Only a regular file: a FIFO given as the plan would block the read until someone wrote to it.
    const fd = openRegularFile(path, "plan");
    try {
      text = readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    if (e instanceof PathError) throw new PlanError("", `cannot read ${path}: ${e.reason}`);
    throw new PlanError("", `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return parsePlan(text);
}
