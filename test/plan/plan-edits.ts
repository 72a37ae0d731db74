// Shared by the plan checks' unit tests: compiled plans as JSON to edit, and the PlanError a check throws.
import { PlanError } from "../../src/plan/plan-error.js";
import type { Plan } from "../../src/plan/plan.js";
import { compileSample } from "../compile/helpers.js";

/** Plan JSON as tests poke at it: any field, any value. */
export type Mutable = Record<string, any>;

/** gpt-tiny on 4 cpu devices: 2 stages × 2 FSDP replicas, 2 micro-batches, a tied embedding, clipping. */
export const fsdpPlan: Plan = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", no_sync: false }).plan;

/** A deep copy of `plan`, edited. */
export function edited(plan: Plan, edit: (p: Mutable) => void): Plan {
  const copy = JSON.parse(JSON.stringify(plan)) as Mutable;
  edit(copy);
  return copy as Plan;
}

/** The PlanError `check` throws (fails the test when it throws none or something else). */
export function refusal(check: () => unknown): PlanError {
  try {
    check();
  } catch (e) {
    if (e instanceof PlanError) return e;
    throw new Error(`expected a PlanError, got ${String(e)}`);
  }
  throw new Error("expected the plan to be refused");
}

export const textIndex = (p: Mutable, program: number, text: string): number => {
  const i = (p.programs[program].actions as Mutable[]).findIndex((a) => a.text === text);
  if (i < 0) throw new Error(`program ${program} has no ${text}`);
  return i;
};
