// The tensor-parallel collectives inside a predicted compute action: its stage's layers' collective seconds
// (layers.ts, by the cost model) split over the compute kinds as compile splits the layers' own times
// (src/compile/stage-costs.ts layerSeconds): F and R run the forward's; a backward the backward's, of which
// the input gradient (I) takes the activations' share of the FLOPs and the weight gradient (W) the rest; a
// layer recomputed inside its backward runs its forward's again there.
import type { Plan } from "../plan/plan.js";
import type { Action } from "../schedule/action.js";
import type { LayerFacts } from "./layers.js";

/** Seconds of an action's tensor-parallel collectives for one micro-batch (0 for a non-compute action). */
export type TpSecondsOf = (a: Action) => number;

/** Undefined for a plan without tensor parallelism: it has no such collectives to draw. */
export function tpSecondsOf(plan: Plan, facts: readonly LayerFacts[]): TpSecondsOf | undefined {
  if (plan.settings.tensorParallel <= 1) return undefined;
  const recomputed = new Set(plan.settings.recomputeLayers ?? []);
  const stages = plan.stages.map((st) => {
    let forward = 0;
    let input = 0;
    let weight = 0;
    for (let l = st.layers[0]; l <= st.layers[1]; l++) {
      const f = facts[l]!;
      const again = plan.graph.layers[l]!.annotations.checkpoint === true || recomputed.has(l) ? f.tpSeconds.forward : 0;
      forward += f.tpSeconds.forward;
      input += f.tpSeconds.backward * (1 - f.weightShare) + again;
      weight += f.tpSeconds.backward * f.weightShare;
    }
    return { F: forward, R: forward, B: input + weight, I: input, W: weight };
  });
  return (a) => {
    const s = stages[a.stage];
    return s !== undefined && a.kind in s ? s[a.kind as keyof typeof s] : 0;
  };
}
