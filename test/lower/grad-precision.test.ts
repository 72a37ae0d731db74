// Parameter gradients are fp32 whatever the plan's precision. The tied wte.weight of gpt-tiny on one stage
// gets two gradient partials there (the embedding's and the lm_head's) that the graph's own `add` sums: the
// partials must reach that add exactly as their kernels computed them in f32, not rounded to 16 bits first.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { initParams } from "../../src/interp/init.js";
import { lower } from "../../src/lower/lower.js";
import { writeParams } from "../../src/lower/param-pieces.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { ClusterReference } from "../../src/runtime/cluster-reference.js";
import { feedBatch } from "../../src/runtime/cluster-step.js";
import { samplePath, sets } from "../compile/helpers.js";

describe("16-bit plans keep gradient partials in fp32", () => {
  for (const precision of ["bf16", "fp16"] as const) {
    it(`${precision}, gpt-tiny on 1 device: the tied weight's two partials are summed in fp32 as computed`, () => {
      const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 1, chunks: 1, checkpoint: "never", shard: "none", "train.precision": precision }) }).model!;
      const plan = compileModel(model, { cluster: "cpu", devices: 1, source: "gpt-tiny", fsmVersion: "test" }).plan;
      const graph = graphFromJson(plan.model.name, plan.graph);
      const program = lower(plan, graph);
      const dev = program.devices[0]!;
      const wte = dev.slots[program.paramPieces.find((p) => p.param === "wte.weight" && p.dtype === "f32")!.slot]!.shape;
      const isWte = (slot: number) => dev.slots[slot]!.shape.join("x") === wte.join("x");
      // Backward kernels writing a wte-shaped gradient: the two partials, then the add that sums them.
      const backward = dev.instructions.map((ins, i) => ({ ins, i })).filter(({ ins }) => /^\dB\d/.test(ins.action) && ins.outputs.some(isWte));
      const add = backward.find(({ ins }) => ins.op === "add");
      expect(add, "the graph's sum of wte's partials").toBeDefined();
      const partials = backward.filter(({ ins, i }) => i < add!.i && !["add", "fsm_cast", "fsm_copy", "fsm_add_inplace", "fill"].includes(ins.op));
      expect(partials.map(({ ins }) => ins.op)).toHaveLength(2);
      // The sum reads f32 slots and writes one.
      for (const s of [...add!.ins.inputs, ...add!.ins.outputs]) expect(dev.slots[s]!.dtype).toBe("f32");

      const cluster = new ClusterReference(program.devices);
      const init = initParams(graph, 5, "f32");
      writeParams(cluster, program, (n) => init.get(n)!.data as Float32Array);
      if (program.lossScaling) {
        const s = program.lossScaling[0]!;
        if (s.scale !== undefined) cluster.set(0, s.scale, Float32Array.of(1024));
        cluster.set(0, s.inverse, Float32Array.of(1 / 1024));
      }
      const data = syntheticData(graph, { batch: plan.settings.batch, seq: plan.settings.seq!, seed: 3 });
      feedBatch(cluster, program, data.batch(0), plan.settings.microBatches, plan.settings.microBatchSize);
      // Each partial as its kernel wrote it (f32), and the sum, read right after they ran.
      const raw = new Map<number, Float32Array>();
      let sum: Float32Array | undefined;
      cluster.run(undefined, (d, i) => {
        const p = partials.find((x) => x.i === i);
        if (p) raw.set(i, cluster.get(d, p.ins.outputs.find(isWte)!) as Float32Array);
        if (i === add!.i) sum = cluster.get(d, add!.ins.outputs[0]!) as Float32Array;
      });
      const [a, b] = partials.map(({ i }) => raw.get(i)!);
      expect(a!.some((x) => x !== 0) && b!.some((x) => x !== 0)).toBe(true);
      const want = new Float32Array(a!.length);
      for (let k = 0; k < want.length; k++) want[k] = a![k]! + b![k]!; // one f32 rounding of the exact sum
      let differ = 0;
      for (let k = 0; k < want.length; k++) if (sum![k] !== want[k]) differ++;
      expect(differ, `elements of wte's gradient that are not the f32 sum of its partials`).toBe(0);
    });
  }
});
