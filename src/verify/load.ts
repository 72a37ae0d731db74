// Reading a plan: parse, then prove it usable before any command touches it — every field typed and every
// reference in range (validate.ts), the sections agreeing on placement (check-placement.ts), the graph's
// shapes following from its ops (check-graph-shapes.ts), the programs obeying the schedule rules
// (check-schedule.ts) and doing all their stages' work (check-completeness.ts), and last the content hash
// (content-hash.ts), which catches an edit that keeps the plan consistent. Any problem is a PlanError.
import { closeSync, readFileSync } from "node:fs";
import { openRegularFile, PathError } from "../files/path-kind.js";
import { checkCompleteness } from "./check-completeness.js";
import { checkGraphShapes } from "./check-graph-shapes.js";
import { checkPlacement } from "./check-placement.js";
import { checkSchedule } from "./check-schedule.js";
import { verifyHash } from "../plan/content-hash.js";
import { PlanError } from "../plan/plan-error.js";
import type { Plan } from "../plan/plan.js";
import { validatePlan } from "../plan/validate.js";

/** Parses and checks plan JSON text; returns the plan without its content hash. */
export function parsePlan(text: string): Plan {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new PlanError("", `not valid JSON: ${(e as Error).message}`);
  }
  const plan = validatePlan(value);
  checkConsistency(plan);
  return verifyHash(value as Readonly<Record<string, unknown>>, plan);
}

/** The checks beyond types, in the order that gives the most specific message first. */
export function checkConsistency(plan: Plan): void {
  checkPlacement(plan);
  checkGraphShapes(plan);
  checkSchedule(plan);
  checkCompleteness(plan);
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
