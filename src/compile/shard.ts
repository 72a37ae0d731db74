// Step 4 of compile: one src/shard plan per (virtual) stage over the stage's data-parallel replicas.
import type { Graph } from "../graph/graph.js";
import { buildShardPlan } from "../shard/plan.js";
import { paramUses } from "../shard/sharing.js";
import type { ShardPlan } from "../shard/types.js";
import { CompileError } from "./errors.js";
import type { ResolvedSettings } from "./resolve.js";
import type { StageAssignment } from "./stages.js";

export function planShards(training: Graph, stages: readonly StageAssignment[], s: ResolvedSettings): ShardPlan[] {
  // Every stage's layers: a weight read on several stages is held by each, with a tied all-reduce among them.
  const pipeline = { stages: stages.map((st) => ({ start: st.start, end: st.end })) };
  const uses = paramUses(training);
  return stages.map((st) => {
    try {
      return buildShardPlan({
        graph: training,
        strategy: s.shard,
        precision: s.precision,
        reduceDtype: s.reduceDtype,
        optimizer: s.optimizer,
        ranks: st.ranks,
        layers: { start: st.start, end: st.end },
        stage: st.index,
        pipeline,
        bucketMB: s.bucketMB,
        fsdpMinParams: s.fsdpMinParams,
        reshardAfterForward: s.reshardAfterForward,
        shardGroup: s.shardGroup,
        noSync: s.noSync,
        uses,
      });
    } catch (e) {
      // src/shard reports layouts it cannot plan (a stage reading a weight without computing any of its
      // gradient) as "not implemented".
      if (e instanceof Error && e.message.startsWith("not implemented")) throw new CompileError(`stage ${st.index}: ${e.message}`);
      throw e;
    }
  });
}
