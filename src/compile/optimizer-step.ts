// Step 6d of compile: what each stage's OPTIMIZER waits for. With gradient clipping the global norm needs every
// gradient of the model: one all-reduce of the squared norms over all devices (a rendezvous of every program)
// after each program's last gradient collective; without it each stage waits for its own last one.
import type { Cluster } from "../cost/cluster.js";
import { collectiveTime, groupLink } from "../cost/collectives.js";
import { meshRank } from "../plan/plan.js";
import { shardAction } from "../schedule/action.js";
import { compareOrder, type Placer } from "./placer.js";
import type { ResolvedSettings } from "./resolve.js";

/** fp32 sum of squares, one per rank. */
const NORM_BYTES = 4;

/** Whether clipping needs a norm all-reduce: always across pipeline stages; within one stage only when the
 *  gradients are sharded (with none and oss every replica holds the whole reduced gradient). */
export function needsNormAllReduce(s: Pick<ResolvedSettings, "clipGradNorm" | "devices" | "stages" | "shard" | "tensorParallel">): boolean {
  if (s.clipGradNorm === undefined || s.devices === 1) return false;
  // A tensor-parallel rank holds only slices of its split parameters' gradients.
  return s.stages > 1 || s.shard === "sddp" || s.shard === "fsdp" || s.tensorParallel > 1;
}

/**
 * Seconds of the norm all-reduce, as two rings (within each stage's replicas, then along the pipeline): a
 * 4-byte reduction is all latency, and one flat ring over every device would pay 2(n−1) steps of it.
 */
export function normSeconds(cluster: Cluster, s: ResolvedSettings): number {
  const replicas = Array.from({ length: s.dataParallel }, (_, r) => meshRank(s, 0, r));
  const pipe = Array.from({ length: s.stages }, (_, p) => meshRank(s, p, 0));
  return (
    collectiveTime("all_reduce", NORM_BYTES, s.dataParallel, groupLink(cluster, replicas)) +
    collectiveTime("all_reduce", NORM_BYTES, s.stages, groupLink(cluster, pipe))
  );
}

export function wireOptimizer(
  placer: Placer,
  gradients: ReadonlyMap<number, readonly { program: number; id: number }[]>,
  s: ResolvedSettings,
  cluster: Cluster,
): void {
  const last = (list: readonly { program: number; id: number }[]) =>
    list.reduce<{ program: number; id: number } | undefined>((best, g) => (!best || compareOrder(placer.orderOf(g.program, g.id), placer.orderOf(best.program, best.id)) > 0 ? g : best), undefined);
  if (!needsNormAllReduce(s)) {
    for (const [stage, list] of gradients) {
      const g = last(list);
      if (g) placer.action(g.program, placer.stage(stage).optimizer).deps.push(g.id);
    }
    return;
  }
  // Every program joins once, after its last backward and its gradient collectives (the comm stream runs
  // in order, so following the last of them is following all of them).
  let key = 0;
  const members = placer.programs.map((prog, p) => {
    const backward = prog.compute.filter((id) => prog.actions[id]!.action.kind !== "OPTIMIZER");
    const lastCompute = backward[backward.length - 1]!;
    key = Math.max(key, placer.endOf(p, lastCompute));
    for (const stage of prog.stages) for (const g of gradients.get(stage) ?? []) key = Math.max(key, placer.orderOf(g.program, g.id)[0]);
    return {
      program: p,
      fields: {
        action: shardAction("ALL_REDUCE", Math.min(...prog.stages)),
        stream: "comm" as const,
        seconds: [normSeconds(cluster, s)],
        deps: [lastCompute],
        collective: { group: "world" as const, of: "gradNorm" as const, bytes: NORM_BYTES },
      },
    };
  });
  const ids = placer.addGroup(members, key, 2);
  placer.programs.forEach((prog, p) => {
    for (const stage of prog.stages) placer.action(p, placer.stage(stage).optimizer).deps.push(ids[p]!);
  });
}
