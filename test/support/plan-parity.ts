// Plans on the native cluster (threads, the in-process communicator) against the 1-device plan of the same
// model and seed: every step's loss and the final weights (each rank's pieces joined) within fp32 rtol 1e-5.
// Shared by the runtime's parity tests of tensor parallelism, hybrid sharding and no_sync.
import { expect } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { initParams } from "../../src/interp/init.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { lower } from "../../src/lower/lower.js";
import { createNativeCluster, type NativeClusterDescription } from "../../src/native/binding.js";
import { ClusterReference } from "../../src/runtime/cluster-reference.js";
import { feedBatch, meanLoss } from "../../src/runtime/cluster-step.js";
import { readParam, writeParams } from "../../src/lower/param-pieces.js";
import { samplePath, sets } from "../compile/helpers.js";
import { checkLlamaTiny } from "./llama-tiny.js";

export type Overrides = Record<string, string | number>;
const adam = { "train.optimizer": "adam(lr: 3e-3, betas: (0.9, 0.99), eps: 1e-3)" };
export const ONE = { stages: 1, data_parallel: 1, tensor_parallel: 1, shard: "none", chunks: 1, schedule: "1f1b", virtual_stages: 1, checkpoint: "never" };

export type Sample = "mlp" | "gpt-tiny" | "llama-tiny";
const LLAMA_TRAIN = "train { batch = 4, seq = 8, optimizer = adamw(lr: 3e-3, eps: 1e-3, weight_decay: 0.1), clip_grad_norm = 0.5, precision = fp32, seed = 1, steps = 10, data = synthetic() }\n";

/** The parallel section of the tiny Llama (checked in memory, so its settings are written, not --set). */
function llamaParallel(o: Overrides): string {
  const entries = Object.entries(o).filter(([k]) => !k.includes("."));
  return `parallel { ${entries.map(([k, v]) => `${k} = ${v}`).join(", ")} }\n`;
}

export function planFor(name: Sample, overrides: Overrides, devices: number): Plan {
  const model = (name === "llama-tiny" ? checkLlamaTiny(LLAMA_TRAIN + llamaParallel(overrides)) : checkFile(samplePath(name), { overrides: sets(overrides) })).model!;
  return compileModel(model, { cluster: "cpu", devices, source: name, fsmVersion: "test" }).plan;
}

/** How the native executor is put together: its Device's arena route, its Communicator (a test plug-in
 *  may delay every call by a seeded random time, so arrivals and completions come in other orders), and
 *  how many host threads take turns on the devices (0: a thread per stream). */
export type Seams = Pick<NativeClusterDescription, "device" | "communicator" | "hostThreads">;

/** Trains on the native cluster (threads, communicator; `native` may pick its device and communicator) or,
 *  with `native` false, the sequential reference executor (`random` orders its ready actions). */
export async function train(
  plan: Plan,
  steps: number,
  native: boolean | Seams = true,
  random?: () => number,
): Promise<{ losses: number[]; params: Map<string, Float32Array>; calls: Record<string, number> }> {
  const graph = graphFromJson(plan.model.name, plan.graph);
  const program = lower(plan, graph);
  const cluster = native ? createNativeCluster({ devices: program.devices, timeoutSeconds: 20, ...(native !== true && native) }) : new ClusterReference(program.devices);
  // The whole model's parameters (initParams draws them whole for a rank's graph too); each rank gets its slice.
  const init = initParams(graph, 5, "f32");
  writeParams(cluster, program, (n) => init.get(n)!.data as Float32Array);
  const data = syntheticData(graph, { batch: plan.settings.batch, ...(plan.settings.seq !== null && { seq: plan.settings.seq }), seed: 3 });
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) {
    feedBatch(cluster, program, data.batch(s), plan.settings.microBatches, plan.settings.microBatchSize);
    await (cluster instanceof ClusterReference ? cluster.run(random) : cluster.run());
    losses.push(meanLoss(cluster, program));
  }
  const calls = cluster instanceof ClusterReference ? {} : cluster.communicatorCalls();
  return { losses, params: new Map(graph.params().map((p) => [p.name, readParam(cluster, program, p.name)])), calls };
}

const RTOL = 1e-5;
const ATOL = 1e-6;

/** Trains `name` with `overrides` on `devices` and on 1 device; `check` sees the many-device plan first (that
 *  it is the plan the case means to test). Returns the many-device run's communicator calls. */
export async function parity(name: Sample, overrides: Overrides, devices: number, check: (plan: Plan) => void, steps = 10): Promise<Record<string, number>> {
  const base = { ...(name === "gpt-tiny" && adam), ...overrides };
  const one = await train(planFor(name, { ...base, ...ONE }, 1), steps);
  const plan = planFor(name, base, devices);
  check(plan);
  const many = await train(plan, steps);
  // The group's collectives really ran through the communicator.
  expect(many.calls.allReduce ?? 0).toBeGreaterThan(0);
  for (let s = 0; s < steps; s++) {
    const [got, want] = [many.losses[s]!, one.losses[s]!];
    expect(Math.abs(got - want), `step ${s + 1}: ${got} vs ${want}`).toBeLessThanOrEqual(ATOL + RTOL * Math.abs(want));
  }
  for (const [p, want] of one.params) {
    const got = many.params.get(p)!;
    expect(got.length, p).toBe(want.length);
    for (let i = 0; i < want.length; i++) {
      if (Math.abs(got[i]! - want[i]!) > ATOL + RTOL * Math.abs(want[i]!)) expect.fail(`${p}[${i}]: ${got[i]} vs ${want[i]} after ${steps} steps`);
    }
  }
  return many.calls;
}
