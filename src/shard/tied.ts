// Weights shared across pipeline stages: for each shared weight a stage holds, the stages holding replicas
// and the all-reduce summing their partial gradients (Megatron-LM's embedding group, for any weight read on
// any number of stages). Types and the choice of order are documented on TiedParam and TiedCollective.
import type { ShardStrategy } from "../check/settings-types.js";
import { talks, type PlanContext, type StrategyParts } from "./context.js";
import { after } from "./points.js";
import { holderStages, isShared, type ParamUse } from "./sharing.js";
import { inRange, type StageParam } from "./stage-params.js";
import type { LayerRange, TiedCollective, TiedParam } from "./types.js";

/**
 * The shared weights among the stage's parameters. `stageOf` (stage of every layer) names the stages of a
 * weight read outside the stage; without it such a weight is an error, since the plan could not say whom to
 * sum gradients with.
 */
export function sharedParams(
  uses: readonly ParamUse[],
  params: readonly StageParam[],
  layers: LayerRange,
  stage: number,
  stageOf: readonly number[] | undefined,
): TiedParam[] {
  const out: TiedParam[] = [];
  for (const p of params) {
    const u = uses[p.index]!;
    if (!isShared(u)) continue;
    const outside = u.useLayers.filter((l) => !inRange(layers, l));
    if (outside.length > 0 && stageOf === undefined) {
      throw new Error(
        `internal: stage layers [${layers.start}, ${layers.end}) share '${u.name}' with layer${outside.length > 1 ? "s" : ""} ${outside.join(", ")} ` +
          `outside them; pass ShardSpec.pipeline (every stage's layers) so the plan can name the stages it is tied with`,
      );
    }
    const stages = stageOf === undefined ? [stage] : holderStages(u, stageOf);
    out.push({
      name: u.name,
      aliases: u.aliases,
      numel: u.numel,
      declaredLayer: u.layer,
      useLayers: u.useLayers,
      stages,
      primaryStage: stages[0]!,
      localUseLayers: p.useLayers,
      gradLayer: p.gradLayer,
    });
  }
  return out;
}

/** Index into parts.collectives of the stage's gradient collective that carries `name`, if the stage talks. */
function reductionOf(parts: StrategyParts, name: string): number | undefined {
  const i = parts.collectives.findIndex((c) =>
    c.of === "unit"
      ? c.kind === "REDUCE_SCATTER" && parts.units[c.unit]!.params.some((m) => m.name === name)
      : c.of === "gradBucket" && parts.gradBuckets[c.unit]!.params.includes(name),
  );
  return i < 0 ? undefined : i;
}

/** The tied all-reduces of the stage's weights shared with other stages, and `tied` with their indices. */
export function tiedCollectives(
  strategy: ShardStrategy,
  ctx: PlanContext,
  parts: StrategyParts,
  shared: readonly TiedParam[],
): { tied: TiedParam[]; collectives: TiedCollective[] } {
  const collectives: TiedCollective[] = [];
  // fsdp and sddp reduce every micro-batch into one rank's shard or owner: sum while the partial is whole
  // (under fsdp's no_sync once, on the step's accumulated partial, before the unit's one reduce-scatter).
  const tiedFirst = strategy === "fsdp" || strategy === "sddp";
  const tied = shared.map((t) => {
    if (t.stages.length < 2 || t.gradLayer === undefined) return t;
    const index = talks(ctx) ? reductionOf(parts, t.name) : undefined;
    if (talks(ctx) && index === undefined) throw new Error(`internal: no gradient collective of stage carries tied weight '${t.name}'`);
    const base = {
      kind: "ALL_REDUCE",
      of: "tiedGrad",
      param: t.name,
      unit: parts.gradBuckets.length + collectives.length,
      bytes: t.numel * ctx.bytes.grad,
      stages: t.stages,
      rule: "sameReplica",
    } as const;
    collectives.push(
      index === undefined
        ? { ...base, at: after("weight_grad", t.gradLayer, "last") }
        : tiedFirst
          ? { ...base, reduction: { collective: index, order: "tiedFirst" }, at: after("weight_grad", t.gradLayer, ctx.noSync ? "last" : "each") }
          : { ...base, reduction: { collective: index, order: "reductionFirst" }, at: parts.collectives[index]!.at },
    );
    return { ...t, collective: collectives.length - 1 };
  });
  return { tied, collectives };
}
