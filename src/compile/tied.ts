// Step 6c of compile: the tied all-reduces of weights held on several stages (src/shard's TiedCollective), as
// rendezvous across the programs of those stages: replica r of each holder joins one all-reduce per point.
// Their order against each stage's own gradient reduction is the shard plan's: tiedFirst (fsdp, sddp) sums
// the partials before the reduce-scatter/reduce of the same micro-batch, reductionFirst (none, oss) after
// the data-parallel all-reduce.
import type { Cluster } from "../cost/cluster.js";
import { groupCollectiveTime } from "../cost/collectives.js";
import { tiedAction } from "../shard/actions.js";
import { tiedGroups } from "../shard/tied-groups.js";
import type { ShardPlan, TiedCollective } from "../shard/types.js";
import { occurrencesOf, placedKey } from "./collectives.js";
import { CompileError } from "./errors.js";
import type { Placer } from "./placer.js";

interface Member {
  readonly plan: ShardPlan;
  readonly t: TiedCollective;
  readonly program: number;
  /** Occurrence compute action by micro-batch (one entry, key -1, for a per-step all-reduce). */
  readonly at: Map<number, number>;
}

export function placeTiedCollectives(
  placer: Placer,
  shards: readonly ShardPlan[],
  cluster: Cluster,
  programOf: (stage: number) => number,
  placed: ReadonlyMap<string, number>,
  gradients: Map<number, { program: number; id: number }[]>,
): void {
  const params = [...new Set(shards.flatMap((p) => p.tiedCollectives.map((t) => t.param)))];
  for (const param of params) {
    let groups: number[][];
    try {
      groups = tiedGroups(shards, param);
    } catch (e) {
      if (e instanceof Error && e.message.startsWith("not implemented")) throw new CompileError(e.message);
      throw e;
    }
    const members: Member[] = shards
      .filter((p) => p.tiedCollectives.some((t) => t.param === param))
      .map((plan) => {
        const t = plan.tiedCollectives.find((c) => c.param === param)!;
        const program = programOf(plan.stage);
        const each = t.at.microBatch === "each";
        const at = new Map<number, number>();
        for (const x of occurrencesOf(t.at, placer.stage(plan.stage))) at.set(each ? placer.action(program, x).action.mb! : -1, x);
        return { plan, t, program, at };
      });
    const seconds = groupCollectiveTime(cluster, "all_reduce", members[0]!.t.bytes, groups[0]!);
    for (const mb of members[0]!.at.keys()) {
      let key = 0;
      const parts = members.map((m) => {
        const x = m.at.get(mb);
        if (x === undefined) throw new Error(`internal: stage ${m.plan.stage} has no occurrence of micro-batch ${mb} for the tied all-reduce of '${param}'`);
        const r = m.t.reduction;
        const reduction = r === undefined ? undefined : placed.get(placedKey(m.plan.stage, r.collective, x));
        if (r !== undefined && reduction === undefined) throw new Error(`internal: the reduction of '${param}' on stage ${m.plan.stage} was not placed`);
        key = Math.max(key, placer.endOf(m.program, x, m.t.at.layer));
        if (r?.order === "reductionFirst") key = Math.max(key, placer.orderOf(m.program, reduction!)[0]);
        return { m, x, reduction, first: r?.order === "tiedFirst" };
      });
      const ids = placer.addGroup(
        parts.map(({ m, x, reduction, first }) => ({
          program: m.program,
          fields: {
            action: tiedAction(m.plan, m.t, mb < 0 ? undefined : mb),
            stream: "comm" as const,
            seconds: [seconds],
            partial: [[x, m.t.at.layer]] as [number, number][],
            deps: reduction !== undefined && !first ? [reduction] : [],
            collective: { group: "tied" as const, of: "tiedGrad" as const, bytes: m.t.bytes },
          },
        })),
        key,
        2,
      );
      parts.forEach(({ m, reduction, first }, i) => {
        const grads = gradients.get(m.plan.stage) ?? [];
        grads.push({ program: m.program, id: ids[i]! });
        gradients.set(m.plan.stage, grads);
        if (reduction === undefined || !first) return;
        // tiedFirst: the stage's reduction of this micro-batch waits for the sum, and follows it on the stream.
        placer.action(m.program, reduction).deps.push(ids[i]!);
        placer.rekey(m.program, reduction, key);
      });
    }
  }
}
