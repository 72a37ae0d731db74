// The overlap model times a stage's tied all-reduces on its comm stream: before the stage's reduction of the
// weight under fsdp/sddp (every micro-batch), after it under none/oss (once per step).
import { describe, expect, it } from "vitest";
import { clusterFor } from "../../src/cost/cluster.js";
import type { LayerSeconds } from "../../src/shard/layer-times.js";
import { simulateShardOverlap } from "../../src/shard/overlap.js";
import { accumulationPasses } from "../../src/shard/passes.js";
import { tiedGroups } from "../../src/shard/tied-groups.js";
import { evenStages, pipelinePlans, sample } from "./helpers.js";

const cluster = clusterFor("h100-sxm", 8);
const layerSeconds: LayerSeconds[] = Array.from({ length: 3 }, () => ({ forward: 1e-3, backward: 1e-3, weightGrad: 1e-3 }));
const M = 3;

describe("tied all-reduces in the overlap model", () => {
  for (const strategy of ["none", "oss", "sddp", "fsdp"] as const) {
    it(`${strategy}: the last stage's tied all-reduce sits on the stream in its order against the reduction`, () => {
      const { training, train } = sample("gpt-tiny");
      const plans = pipelinePlans(training, train, strategy, evenStages(6, 2), 2, { fsdpMinParams: 3000 });
      const plan = plans[1]!;
      const options = { cluster, layerSeconds, passes: accumulationPasses(M) };
      expect(() => simulateShardOverlap(plan, options)).toThrow(/tiedGroups\['wte.weight'\]/);
      const r = simulateShardOverlap(plan, { ...options, tiedGroups: { "wte.weight": tiedGroups(plans, "wte.weight")[0]! } });
      const tied = r.collectives.filter((c) => c.tied === "wte.weight");
      const c = plan.tiedCollectives[0]!;
      expect(tied).toHaveLength(c.at.microBatch === "each" ? M : 1);
      expect(tied.every((t) => t.index === 0 && t.kind === "ALL_REDUCE" && t.unit === c.unit)).toBe(true);
      // Stream position against the reduction of the same micro-batch (per-step ones: the last micro-batch's).
      const red = r.collectives.filter((t) => t.tied === undefined && t.index === c.reduction!.collective);
      for (const t of tied) {
        const pos = r.collectives.indexOf(t);
        const partner = red.find((x) => x.mb === t.mb) ?? red[red.length - 1]!;
        const redPos = r.collectives.indexOf(partner);
        if (c.reduction!.order === "tiedFirst") expect(pos).toBeLessThan(redPos);
        else expect(pos).toBeGreaterThan(redPos);
      }
      const without = simulateShardOverlap({ ...plan, tiedCollectives: [] }, options);
      expect(r.commSeconds).toBeGreaterThan(without.commSeconds);
    });
  }
});
