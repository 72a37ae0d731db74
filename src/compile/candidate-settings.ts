// The resolved settings of the candidate the plan search chose: compile's side of the search's answer (the
// search knows candidates, not compile's settings, so it cannot depend on compile).
import type { Evaluated } from "../search/candidate.js";
import type { ResolvedSettings } from "./resolve.js";

/** The resolved settings of an evaluated candidate, on top of the train settings the search kept. */
export function candidateSettings(base: ResolvedSettings, e: Evaluated, sequenceParallel: boolean): ResolvedSettings {
  const c = e.candidate;
  return {
    ...base,
    devices: c.stages * c.dataParallel * c.tensorParallel,
    stages: c.stages,
    dataParallel: c.dataParallel,
    tensorParallel: c.tensorParallel,
    sequenceParallel,
    virtualStages: c.virtualStages,
    balance: e.balance,
    microBatches: c.microBatches,
    microBatchSize: base.batch / (c.dataParallel * c.microBatches),
    schedule: c.schedule,
    checkpoint: c.checkpoint === "selective" ? "never" : c.checkpoint,
    shard: c.shard,
    reshardAfterForward: c.reshardAfterForward,
    shardGroup: c.shardGroup,
    noSync: c.noSync,
    recomputeLayers: e.recomputeLayers,
  };
}
