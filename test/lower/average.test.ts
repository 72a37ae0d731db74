// The optimizer phase's averaging (src/lower/optimizer.ts): summed gradients are scaled by 1/(dp·m) in place,
// and gradients that lie end to end in one buffer — a gradient bucket's views, all-reduced as one — are scaled
// by one instruction over their run instead of one per parameter. Every element still gets the one multiply,
// so training is unchanged (the runtime's parity tests); here, the instruction count follows the buckets.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { lower } from "../../src/lower/lower.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { samplePath, sets } from "../compile/helpers.js";

function scalesOnDevice0(bucketMB: number, dp = 4, chunks = 2): { scales: number; buckets: number; params: number; bucketed: number } {
  const overrides = { stages: 1, data_parallel: dp, shard: "none", chunks, checkpoint: "never", bucket_mb: bucketMB };
  const model = checkFile(samplePath("mlp"), { overrides: sets(overrides) }).model!;
  const plan = compileModel(model, { cluster: "cpu", devices: dp, source: "mlp", fsmVersion: "test" }).plan;
  const program = lower(plan, graphFromJson(plan.model.name, plan.graph));
  const buckets = plan.shard[0]!.gradBuckets;
  return {
    scales: program.devices[0]!.instructions.filter((i) => i.op === "fsm_scale").length,
    buckets: buckets.length,
    params: plan.graph.params.length,
    bucketed: buckets.reduce((n, b) => n + b.params.length, 0),
  };
}

describe("averaging the summed gradients", () => {
  it("one scale per gradient bucket, each parameter's gradient averaged once", () => {
    const r = scalesOnDevice0(25);
    expect(r.bucketed).toBe(r.params); // the mlp's 12 parameters all ride in buckets
    expect(r.buckets).toBeLessThan(r.params);
    expect(r.scales).toBe(r.buckets);
  });

  it("none where there is nothing to average (one replica, one micro-batch: a scale by 1), some over two micro-batches", () => {
    expect(scalesOnDevice0(25, 1, 1).scales).toBe(0);
    expect(scalesOnDevice0(25, 1, 2).scales).toBeGreaterThan(0);
  });

  it("more, smaller buckets: one scale each", () => {
    const r = scalesOnDevice0(0.01);
    expect(r.buckets).toBeGreaterThan(1);
    expect(r.scales).toBe(r.buckets + (r.params - r.bucketed));
  });
});
