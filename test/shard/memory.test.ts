// Per-device model-state memory of shard plans equals src/cost's ZeRO formulas up to padding (FSDP) or the
// partition's imbalance (OSS/ShardedDDP), for every strategy, every sample and several group sizes.
import { describe, expect, it } from "vitest";
import { SHARD_STRATEGIES } from "../../src/check/settings-types.js";
import { modelStateBytes } from "../../src/cost/memory.js";
import { SAMPLES, sample, samplePlan, sum } from "./helpers.js";

const GROUPS = [1, 2, 3, 4, 8, 64];

describe("model-state memory vs the ZeRO formulas", () => {
  for (const name of SAMPLES) {
    for (const strategy of SHARD_STRATEGIES) {
      it(`${name}, ${strategy}, groups of ${GROUPS.join("/")}`, () => {
        const { model, train } = sample(name);
        const psi = model.graph.parameterCount();
        for (const n of GROUPS) {
          const plan = samplePlan(name, strategy, n);
          const { param: p, grad: g, optimizer: k } = plan.bytesPerParam;
          const m = plan.memory;
          const ceil = Math.ceil(psi / n);
          expect(m.zeroFormula).toBe(modelStateBytes(psi, n, strategy, train.precision, train.optimizer, train.reduceDtype));
          expect(m.perRank).toHaveLength(n);
          for (const r of m.perRank) expect(r.total).toBe(r.param + r.grad + r.optimizer);
          expect(m.maxTotal).toBe(Math.max(...m.perRank.map((r) => r.total)));
          // The identity every strategy satisfies: the fullest rank is the formula plus its excess elements.
          expect(m.maxTotal).toBe(m.zeroFormula + m.shardedBytesPerElement * m.excessElements);
          expect(m.excessElements).toBeGreaterThanOrEqual(0);
          switch (strategy) {
            case "none":
              expect(m.excessElements).toBe(0);
              for (const r of m.perRank) expect(r.total).toBe((p + g + k) * psi);
              break;
            case "oss":
            case "sddp": {
              const part = plan.partition!;
              expect(m.excessElements).toBe(part.chosen.largest - ceil);
              // Sharded state adds up to exactly the model's: no padding, just an uneven split.
              const sharded = strategy === "oss" ? k : g + k;
              const shardedTotal = sum(m.perRank.map((r) => (strategy === "oss" ? r.optimizer : r.grad + r.optimizer)));
              expect(shardedTotal).toBe(sharded * psi);
              expect(sum(m.perRank.map((r) => r.param))).toBe(n * p * psi);
              break;
            }
            case "fsdp": {
              const padding = sum(plan.units.map((u) => u.padding));
              for (const r of m.perRank) expect(r.total).toBe(((p + g + k) * (psi + padding)) / n);
              // Padding is under one element per rank per unit.
              expect(m.excessElements).toBeLessThanOrEqual(plan.units.length);
              expect(m.excessElements).toBe((psi + padding) / n - ceil);
              break;
            }
          }
          if (n === 1) expect(m.maxTotal).toBe((p + g + k) * psi);
        }
      });
    }
  }

  it("the ZeRO ordering holds on llama-7b at 64: none > oss > sddp > fsdp", () => {
    const totals = SHARD_STRATEGIES.map((s) => samplePlan("llama-7b", s, 64).memory.maxTotal);
    for (let i = 1; i < totals.length; i++) expect(totals[i]!).toBeLessThan(totals[i - 1]!);
  });
});
