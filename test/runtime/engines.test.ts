// The engines compute the same step: the fused native step program (one arena, instructions in the addon)
// gives bit-for-bit the losses and weights of the reference executor driving the same native kernels, and
// the native cluster (a thread pair per device, sharded state, collectives) and the interpreter's kernels
// agree with them within f32 rounding — for every schedule, micro-batching, replicas, stages.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { lowerStep } from "../../src/runtime/step-program.js";
import { runPlan, type Engine } from "../../src/runtime/run-loop.js";
import { samplePath, sets } from "../compile/helpers.js";

function plan(name: "mlp" | "gpt-tiny", overrides: Record<string, string | number>, devices: number): Plan {
  const model = checkFile(samplePath(name), { overrides: sets(overrides) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
}

async function train(p: Plan, engine: Engine, steps: number): Promise<{ losses: number[]; params: Map<string, Float32Array> }> {
  const losses: number[] = [];
  const params = new Map<string, Float32Array>();
  await runPlan(p, {
    steps,
    engine,
    onStep: (r) => losses.push(r.loss),
    onDone: (e) => {
      for (const prm of p.graph.params) params.set(prm.name, e.param(prm.name));
    },
  });
  return { losses, params };
}

const CASES: [string, "mlp" | "gpt-tiny", Record<string, string | number>, number][] = [
  ["mlp, 2 stages × 2 replicas × 4 micro-batches, 1F1B", "mlp", { stages: 2, data_parallel: 2, chunks: 4 }, 4],
  ["mlp, 3 stages, GPipe", "mlp", { stages: 3, data_parallel: 1, chunks: 4, schedule: "gpipe" }, 3],
  ["gpt-tiny, 2 stages × 2 replicas, ZB-H1", "gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, schedule: "zero_bubble", shard: "oss", checkpoint: "never" }, 4],
  ["gpt-tiny, interleaved, checkpoint always", "gpt-tiny", { stages: 2, data_parallel: 1, chunks: 2, schedule: "interleaved", virtual_stages: 2, shard: "none", checkpoint: "always" }, 2],
];

describe("engines agree", () => {
  for (const [title, name, overrides, devices] of CASES) {
    it(`${title}: native-fused = native-kernels bit for bit; native ≈ reference`, async () => {
      const p = plan(name, overrides, devices);
      const fused = await train(p, "native-fused", 4);
      const kernels = await train(p, "native-kernels", 4);
      const reference = await train(p, "reference", 4);
      const cluster = await train(p, "native", 4);
      expect(fused.losses).toEqual(kernels.losses);
      for (const [k, v] of fused.params) expect(Array.from(v), k).toEqual(Array.from(kernels.params.get(k)!));
      for (const run of [fused, cluster]) run.losses.forEach((l, i) => expect(Math.abs(l - reference.losses[i]!) / Math.abs(reference.losses[i]!)).toBeLessThan(1e-5));
    });
  }

  it("the native engine is deterministic run to run", async () => {
    const p = plan("gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "none", checkpoint: "never" }, 4);
    const a = await train(p, "native", 3);
    const b = await train(p, "native", 3);
    expect(a.losses).toEqual(b.losses);
  });

  it("the step program: one slot per value, every operand in the arena, live values never share bytes", () => {
    const p = plan("gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "none", checkpoint: "never" }, 4);
    const prog = lowerStep(p, graphFromJson(p.model.name, p.graph));
    const bytes = (s: (typeof prog.slots)[number]) => 4 * s.shape.reduce((a, b) => a * b, 1);
    for (const s of prog.slots) {
      expect(s.offset % 64).toBe(0);
      expect(s.offset + bytes(s)).toBeLessThanOrEqual(prog.arenaBytes);
    }
    // Reuse pays: the arena is well below the sum of the slots.
    const total = prog.slots.reduce((n, s) => n + bytes(s), 0);
    expect(prog.arenaBytes).toBeLessThan(0.7 * total);
    // Within each instruction, no output overlaps an input or another output; and a slot read by an
    // instruction was not overwritten by any instruction since it was written.
    const overlaps = (a: number, b: number) => {
      const [x, y] = [prog.slots[a]!, prog.slots[b]!];
      return a !== b && x.offset < y.offset + bytes(y) && y.offset < x.offset + bytes(x);
    };
    const lastWrite = new Map<number, number>();
    prog.instructions.forEach((ins, i) => {
      for (const s of ins.inputs) {
        const w = lastWrite.get(s);
        if (w === undefined) continue;
        for (let k = w + 1; k < i; k++) for (const o of prog.instructions[k]!.outputs) expect(overlaps(o, s), `slot ${s} clobbered by instruction ${k}`).toBe(false);
      }
      for (const o of ins.outputs) for (const s of [...ins.inputs, ...ins.outputs]) expect(overlaps(o, s), `${ins.op} output ${o} overlaps ${s}`).toBe(false);
      for (const o of ins.outputs) lastWrite.set(o, i);
    });
    const written = new Set<number>();
    for (const ins of prog.instructions) for (const o of ins.outputs) {
      // Only the update copies (into a parameter's or state's own slot) and in-place gradient sums write a
      // slot twice.
      if (ins.op !== "fsm_copy" && ins.op !== "fsm_add_inplace") expect(written.has(o)).toBe(false);
      written.add(o);
    }
    expect(prog.lossSlots).toHaveLength(2 * 2);
  });
});
