// Shard collectives as schedule actions (src/schedule/action.ts), for the plan lowering and for text output.
import { shardAction, type Action } from "../schedule/action.js";
import type { ShardCollective, ShardFree, ShardPlan, TiedCollective } from "./types.js";

/** The action of one collective; `mb` names the micro-batch of a per-micro-batch one (omit for per-step). */
export function collectiveAction(plan: ShardPlan, c: ShardCollective, mb?: number): Action {
  if (c.at.microBatch === "each" && mb === undefined) {
    throw new Error(`internal: a per-micro-batch ${c.kind} of unit ${c.unit} needs its micro-batch`);
  }
  return shardAction(c.kind, plan.stage, {
    ...(mb !== undefined && { mb }),
    unit: c.unit,
    ...(c.root !== undefined && { peer: c.root }),
  });
}

export function freeAction(plan: ShardPlan, f: ShardFree, mb?: number): Action {
  return shardAction("FREE", plan.stage, { ...(mb !== undefined && { mb }), unit: f.unit });
}

/** The stage's ALL_REDUCE of a tied weight's gradient; `mb` names the micro-batch of a per-micro-batch one. */
export function tiedAction(plan: ShardPlan, t: TiedCollective, mb?: number): Action {
  if (t.at.microBatch === "each" && mb === undefined) {
    throw new Error(`internal: the per-micro-batch tied all-reduce of '${t.param}' needs its micro-batch`);
  }
  return shardAction(t.kind, plan.stage, { ...(mb !== undefined && { mb }), unit: t.unit });
}
