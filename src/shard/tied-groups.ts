// The rank groups of a tied weight's gradient all-reduce, from the shard plans of every stage: the plan
// compiler's and the overlap model's way from a TiedCollective's stages and rule to global ranks.
import type { ShardPlan, TiedCollective } from "./types.js";

/**
 * One group per data-parallel replica index r: group rank r of each stage holding the weight, in stage
 * order (TiedCollective.rule `sameReplica`). `plans` may hold any stages' plans; those of every
 * participating stage must be among them, agree on strategy, group size and cadence, and place their
 * replicas on distinct ranks (virtual stages on one device would need one shared copy, not two replicas).
 */
export function tiedGroups(plans: readonly ShardPlan[], param: string): number[][] {
  const byStage = new Map(plans.map((p) => [p.stage, p]));
  const first = plans.find((p) => p.tiedCollectives.some((t) => t.param === param));
  if (!first) throw new Error(`internal: no stage plan has a tied all-reduce of '${param}'`);
  const stages = first.tiedCollectives.find((t) => t.param === param)!.stages;
  const members = stages.map((s) => {
    const plan = byStage.get(s);
    const t = plan?.tiedCollectives.find((c) => c.param === param);
    if (!plan || !t) throw new Error(`internal: stage ${s} holds '${param}' but its plan (with a tied all-reduce of it) is missing`);
    return { plan, t };
  });
  const same = (f: (m: { plan: ShardPlan; t: TiedCollective }) => unknown): boolean => members.every((m) => f(m) === f(members[0]!));
  if (!same((m) => m.plan.strategy) || !same((m) => m.plan.groupSize) || !same((m) => m.t.at.microBatch) || !same((m) => m.t.stages.join())) {
    throw new Error(`internal: the stages holding '${param}' (${stages.join(", ")}) differ in strategy, group size or tied stages`);
  }
  return first.ranks.map((_, r) => {
    const group = members.map((m) => m.plan.ranks[r]!);
    if (new Set(group).size !== group.length) {
      throw new Error(
        `not implemented: stages ${stages.join(", ")} holding '${param}' share a device (ranks ${group.join(", ")}); ` +
          `virtual stages on one device need one copy, not replicas`,
      );
    }
    return group;
  });
}
