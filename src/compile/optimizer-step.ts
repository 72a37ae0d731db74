// Step 6d of compile: what each stage's OPTIMIZER waits for. With gradient clipping the global norm needs every
// gradient of the model: one all-reduce of the squared norms over all devices (a rendezvous of every program)
// after each program's last gradient collective; without it each stage waits for its own last one.
import type { Cluster } from "../cost/cluster.js";
import { NORM_BYTES, needsNormAllReduce, normSeconds } from "../cost/grad-norm.js";
import { shardAction } from "../schedule/action.js";
import { compareOrder, type Placer } from "./placer.js";
import type { ResolvedSettings } from "./resolve.js";

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
