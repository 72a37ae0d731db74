// Hybrid sharding (FSDP inside shard groups, the groups replicas of each other) and FSDP's no_sync (each unit
// reduce-scattered once per step) on the native cluster, against the 1-device plan of the same model and
// seed: losses and final weights within fp32 rtol 1e-5 after 10 Adam steps, alone, together, under a
// pipeline with a tied embedding, and with tensor parallelism. The plans are checked to be the ones meant
// (the shard groups' all-reduces present, reduce-scatters once per step) and the communicator's call counts
// to follow them.
import { describe, expect, it } from "vitest";
import type { Plan } from "../../src/plan/plan.js";
import { parity } from "../support/plan-parity.js";

const UNITS = { fsdp_min_params: 20000 };

function hybrid(group: number, noSync: boolean) {
  return (plan: Plan): void => {
    expect(plan.settings.shardGroup).toBe(group < plan.settings.dataParallel ? group : undefined);
    expect(plan.settings.noSync ?? false).toBe(noSync);
    // Several units (several reduce-scatters and all-reduces to order), not one whole-stage unit each.
    expect(plan.shard.reduce((n, s) => n + s.units.length, 0)).toBeGreaterThan(plan.shard.length);
    for (const shard of plan.shard) {
      const units = shard.units.length;
      const of = (kind: string) => shard.collectives.filter((c) => c.kind === kind);
      // One all-reduce of each unit's gradient shard across the replicas, once per step, under hybrid sharding.
      expect(of("ALL_REDUCE").length).toBe(group < plan.settings.dataParallel ? units : 0);
      for (const c of of("ALL_REDUCE")) expect(c.at.microBatch).toBe("last");
      for (const c of of("REDUCE_SCATTER")) expect(c.at.microBatch).toBe(noSync ? "last" : "each");
    }
  };
}

describe("hybrid sharding and no_sync on the native cluster equal the 1-device plan", () => {
  it("gpt-tiny: dp 4 in shard groups of 2", async () => {
    const calls = await parity("gpt-tiny", { stages: 1, data_parallel: 4, shard: "fsdp", shard_group: 2, chunks: 2, checkpoint: "never", schedule: "1f1b", ...UNITS }, 4, hybrid(2, false));
    // Gathers and reduce-scatters within the pairs; the replicas' all-reduces besides the gradient norm's.
    expect(calls.allReduce).toBeGreaterThan(4 * 10);
  });

  it("gpt-tiny: no_sync reduce-scatters each unit once per step instead of once per micro-batch", async () => {
    const o = { stages: 1, data_parallel: 2, shard: "fsdp", chunks: 4, checkpoint: "never", schedule: "1f1b", ...UNITS };
    const once = await parity("gpt-tiny", { ...o, no_sync: "true" }, 2, hybrid(2, true));
    const each = await parity("gpt-tiny", { ...o, no_sync: "false" }, 2, hybrid(2, false));
    expect(each.reduceScatter).toBe(4 * once.reduceScatter!);
  });

  it("gpt-tiny: hybrid with no_sync under a 2-stage pipeline (a tied embedding on both stages)", () =>
    parity("gpt-tiny", { stages: 2, data_parallel: 4, shard: "fsdp", shard_group: 2, no_sync: "true", chunks: 2, checkpoint: "never", schedule: "1f1b", fsdp_min_params: 5000 }, 8, hybrid(2, true)));

  it("llama-tiny: tensor parallel 2 × dp 4 in shard groups of 2", () =>
    parity("llama-tiny", { tensor_parallel: 2, stages: 1, data_parallel: 4, shard: "fsdp", shard_group: 2, chunks: 1, checkpoint: "never", schedule: "1f1b", fsdp_min_params: 2000 }, 8, hybrid(2, false)));
});
