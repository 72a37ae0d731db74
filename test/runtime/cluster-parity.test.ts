// The cluster lowering (one program per device, shard strategies, communication) against the 1-device plan
// of the same model and seed: per-step losses and final weights, run on the sequential cluster reference.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { TrainingSession } from "../../src/interp/session.js";
import { floats } from "../../src/interp/tensor.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { samplePath, sets } from "../compile/helpers.js";
import { checkSources } from "../check/helpers.js";
import { rng } from "../support/prng.js";
import { train, type Seams } from "../support/plan-parity.js";

type Overrides = Record<string, string | number>;
type Sample = "mlp" | "gpt-tiny";
const adam = { "train.optimizer": "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)" };

function planFor(name: Sample, overrides: Overrides, devices: number, units = false): Plan {
  // `units`: every transformer block its own FSDP unit (@fsdp_unit), so a stage has several.
  const source = samplePath(name);
  const lib = join(dirname(source), "lib", "transformer.fsm");
  const files = { [source]: readFileSync(source, "utf8").replace("  layers = repeat", "  @fsdp_unit\n  layers = repeat"), [lib]: readFileSync(lib, "utf8") };
  const model = (units ? checkSources(files, source, { overrides: sets(overrides) }) : checkFile(source, { overrides: sets(overrides) })).model!;
  return compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
}

const SEAMS: readonly [string, Seams][] = [
  ["a communicator that delays and reorders every call", { communicator: { kind: "delay", seed: 7, maxMicros: 300 } }],
  ["a device whose arena is mmap'd", { device: { kind: "cpu", arena: "mmap" } }],
];

const RTOL = 1e-5;
const ATOL = 1e-6;

async function parity(name: Sample, overrides: Overrides, devices: number, steps = 10, units = false): Promise<void> {
  const base = { ...(name === "gpt-tiny" && adam), ...overrides };
  const one = await train(planFor(name, { ...base, stages: 1, data_parallel: 1, shard: "none", chunks: 1, schedule: "1f1b", virtual_stages: 1, checkpoint: "never" }, 1), steps, true);
  const plan = planFor(name, base, devices, units);
  if (units) expect(Math.max(...plan.shard.map((s) => s.units.length))).toBeGreaterThan(1);
  const many = await train(plan, steps, true);
  const spec = await train(plan, 2, false);
  for (let s = 0; s < steps; s++) {
    const [got, want] = [many.losses[s]!, one.losses[s]!];
    expect(Math.abs(got - want), `step ${s + 1}: ${got} vs ${want}`).toBeLessThanOrEqual(ATOL + RTOL * Math.abs(want));
  }
  // The threads compute exactly what the sequential specification does.
  expect(many.losses.slice(0, 2)).toEqual(spec.losses);
  // The Device and Communicator are seams: another arena route or a communicator that delays and reorders
  // every call computes the same bits, and the calls really went through the plug-in.
  for (const [what, seams] of SEAMS) {
    const other = await train(plan, steps, seams);
    expect(other.losses, what).toEqual(many.losses);
    for (const [p, v] of many.params) expect(Array.from(other.params.get(p)!), `${what}: ${p}`).toEqual(Array.from(v));
    expect(other.calls, what).toEqual(many.calls);
  }
  if (devices > 1) expect(Object.values(many.calls!).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  for (const [p, want] of one.params) {
    const got = many.params.get(p)!;
    for (let i = 0; i < want.length; i++) {
      if (Math.abs(got[i]! - want[i]!) > ATOL + RTOL * Math.abs(want[i]!)) expect.fail(`${p}[${i}]: ${got[i]} vs ${want[i]} after ${steps} steps`);
    }
  }
}

const cases: [Sample, Overrides, number][] = [];
for (const shard of ["none", "oss", "sddp", "fsdp"]) {
  for (const name of ["mlp", "gpt-tiny"] as const) {
    cases.push([name, { stages: 2, data_parallel: 2, chunks: 2, shard, checkpoint: "never" }, 4]);
    cases.push([name, { stages: 1, data_parallel: 4, chunks: 2, shard, checkpoint: "never" }, 4]);
  }
}
cases.push(["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", checkpoint: "except_last", schedule: "gpipe" }, 4]);
// FSDP keeping gathered weights from the forward to the backward (the default reshards after the forward
// and gathers again for the backward).
cases.push(["gpt-tiny", { stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp", reshard_after_forward: "false", checkpoint: "never" }, 2]);
cases.push(["gpt-tiny", { stages: 2, data_parallel: 1, chunks: 4, shard: "none", checkpoint: "always", schedule: "zero_bubble" }, 2]);
cases.push(["gpt-tiny", { stages: 2, data_parallel: 1, chunks: 4, shard: "none", checkpoint: "never", schedule: "interleaved", virtual_stages: 2 }, 2]);
cases.push(["mlp", { stages: 3, data_parallel: 1, chunks: 4, shard: "none", checkpoint: "always", schedule: "1f1b" }, 3]);

describe("the 1-device plan on the native cluster equals the reference interpreter", () => {
  for (const name of ["mlp", "gpt-tiny"] as const) {
    it(name, async () => {
      const plan = planFor(name, { ...(name === "gpt-tiny" && adam), stages: 1, data_parallel: 1, shard: "none", chunks: 1, checkpoint: "never" }, 1);
      const steps = 5;
      const got = await train(plan, steps, true);
      const graph = graphFromJson(plan.model.name, plan.graph);
      const session = new TrainingSession(graph, { seed: 5, float: "f32" });
      const data = syntheticData(graph, { batch: plan.settings.batch, ...(plan.settings.seq !== null && { seq: plan.settings.seq }), seed: 3 });
      for (let s = 0; s < steps; s++) {
        const want = session.step(data.batch(s)).loss;
        expect(Math.abs(got.losses[s]! - want), `step ${s + 1}`).toBeLessThanOrEqual(1e-5 * Math.abs(want));
      }
      for (const [p, t] of session.params) {
        const want = floats(t);
        const mine = got.params.get(p)!;
        for (let i = 0; i < want.length; i++) if (Math.abs(mine[i]! - want[i]!) > 1e-6 + 1e-4 * Math.abs(want[i]!)) expect.fail(`${p}[${i}]: ${mine[i]} vs ${want[i]}`);
      }
    });
  }
});

describe("cluster lowering: N devices equal the 1-device plan", () => {
  for (const [name, o, devices] of cases) it(`${name} ${JSON.stringify(o)}`, () => parity(name, o, devices));
  for (const reshard of ["true", "false"]) {
    it(`gpt-tiny, every block an FSDP unit, reshard_after_forward ${reshard}, 2 stages × 2 replicas`, () =>
      parity("gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", reshard_after_forward: reshard, checkpoint: "never" }, 4, 10, true));
  }
});

describe("the cluster step is safe and deterministic", () => {
  const shapes: [Sample, Overrides, number, boolean?][] = [
    ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "except_last" }, 4],
    ["gpt-tiny", { stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" }, 2, true],
    ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 4, shard: "sddp", checkpoint: "never", schedule: "zero_bubble" }, 4],
    ["mlp", { stages: 2, data_parallel: 2, chunks: 4, shard: "oss", checkpoint: "never" }, 4],
  ];
  for (const [name, o, devices, units] of shapes) {
    it(`${name} ${JSON.stringify(o)}${units ? ", a unit per block" : ""}: every interleaving the waits allow computes the same bits`, async () => {
      // Communication instructions run as early or as late as their waits let them: if two values shared
      // bytes while one of them could still be in use, some interleaving would corrupt it.
      const plan = planFor(name, { ...(name === "gpt-tiny" && adam), ...o }, devices, units);
      const inOrder = await train(plan, 2, false);
      for (const seed of [1, 2, 3, 4]) {
        const shuffled = await train(plan, 2, false, rng(seed));
        expect(shuffled.losses).toEqual(inOrder.losses);
        for (const [p, v] of inOrder.params) expect(Array.from(shuffled.params.get(p)!), p).toEqual(Array.from(v));
      }
    });
  }

  it("the native cluster gives bit-identical losses and weights run to run", async () => {
    const plan = planFor("gpt-tiny", { ...adam, stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", checkpoint: "never" }, 4);
    const runs = [await train(plan, 5, true), await train(plan, 5, true), await train(plan, 5, true)];
    for (const r of runs.slice(1)) {
      expect(r.losses).toEqual(runs[0]!.losses);
      for (const [p, v] of runs[0]!.params) expect(Array.from(r.params.get(p)!), p).toEqual(Array.from(v));
    }
  });
});
