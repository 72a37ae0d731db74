// From schedule settings to a validated, lowered schedule: order, checkpointing, lowering, validation.
import type { ScheduleCosts } from "./costs.js";
import type { LoweredSchedule } from "./lowered.js";
import { lower } from "./lower.js";
import { buildComputeOrder, type ScheduleSpec } from "./orders/build.js";
import { assertValid } from "./validate.js";

/**
 * The planner's entry point: only schedules that pass validation leave it (DESIGN §7.5). `costs`, when
 * given, orders the comm streams for the durations the schedule will see (see lower()).
 */
export function buildSchedule(spec: ScheduleSpec, costs?: ScheduleCosts): LoweredSchedule {
  const lowered = lower(buildComputeOrder(spec), costs ? { costs } : {});
  assertValid(lowered);
  return lowered;
}
