// What the plan search chooses for every sample on three cluster shapes each, as a text snapshot
// (test/golden/search-choices.txt), with the invariants every searched plan keeps and a few known answers.
// A case that does not compile is a line of the snapshot too (`error: ...`), not a failure. Regenerate
// deliberately with FSM_UPDATE_GOLDEN=1 npx vitest run test/search/choices.test.ts, then review the diff.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { golden } from "../support/golden.js";
import { checkFile, type CheckedModel } from "../../src/check/check.js";
import { compileModel, type Compiled } from "../../src/compile/compile.js";
import { CompileError } from "../../src/compile/errors.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { searchPlans } from "../../src/search/search.js";
import { root, SAMPLES } from "../compile/helpers.js";

/** The compile tests' samples and Llama 2 70B (whose plans they do not cover). */
type SampleName = (typeof SAMPLES)[number] | "llama-70b";
const samplePath = (name: SampleName): string => join(root, "samples", `${name}.fsm`);


interface Case {
  readonly name: SampleName;
  readonly cluster: string;
  readonly devices: number;
}

const shapes = (name: SampleName, ...s: [string, number][]): Case[] => s.map(([cluster, devices]) => ({ name, cluster, devices }));

const CASES: readonly Case[] = [
  ...shapes("mlp", ["cpu", 4], ["h100-sxm", 8], ["h200", 64]),
  ...shapes("gpt-tiny", ["cpu", 4], ["h100-sxm", 8], ["h200", 2]),
  ...shapes("gpt2-124m", ["h100-sxm", 8], ["h100-sxm", 64], ["h200", 256]),
  ...shapes("llama-7b", ["h100-sxm", 8], ["h100-sxm", 64], ["h200", 256]),
  ...shapes("llama-70b", ["h100-sxm", 64], ["h100-sxm", 512], ["h200", 1024]),
  ...shapes("gpt3-175b", ["h100-sxm", 512], ["h100-sxm", 1024], ["h200", 1024]),
];

const label = (c: Case): string => `${c.name} ${c.cluster}×${c.devices}`;

const checked = new Map<SampleName, CheckedModel>();
function model(name: SampleName): CheckedModel {
  let m = checked.get(name);
  if (!m) {
    const r = checkFile(samplePath(name));
    expect(r.diagnostics).toEqual([]);
    m = r.model!;
    checked.set(name, m);
  }
  return m;
}

type Outcome = { readonly compiled: Compiled } | { readonly error: CompileError };

/** Each case compiles once, whichever test asks first (the per-case checks or the snapshot). */
const outcomes = new Map<string, Outcome>();
function outcome(c: Case): Outcome {
  let o = outcomes.get(label(c));
  if (!o) {
    try {
      o = { compiled: compileModel(model(c.name), { cluster: c.cluster, devices: c.devices, source: samplePath(c.name), fsmVersion: "0.0.0-test" }) };
    } catch (e) {
      if (!(e instanceof CompileError)) throw e;
      o = { error: e };
    }
    outcomes.set(label(c), o);
  }
  return o;
}

function line(c: Case): string {
  const o = outcome(c);
  if ("error" in o) return `${label(c)}: error: ${o.error.message.slice(0, 120)}`;
  const plan = o.compiled.plan;
  const balance = plan.stages.map((s) => s.layers[1] - s.layers[0] + 1);
  return `${label(c)}: ${plan.search!.chosen} balance=[${balance.join(",")}] recompute=${plan.settings.recomputeLayers?.length ?? 0}`;
}

/** The chosen plan's settings, for the known answers; fails the test when the case does not compile. */
function chosen(c: Case): Compiled {
  const o = outcome(c);
  if ("error" in o) throw new Error(`${label(c)} does not compile: ${o.error.message}`);
  return o.compiled;
}

const find = (name: SampleName, cluster: string, devices: number): Case => CASES.find((c) => c.name === name && c.cluster === cluster && c.devices === devices)!;

describe("the plan search's choices", () => {
  for (const c of CASES) {
    it(`${label(c)}: a searched plan fits, counts its candidates and ranks them by simulated step time`, () => {
      const o = outcome(c);
      if ("error" in o) return; // recorded in the snapshot
      const plan = o.compiled.plan;
      const search = plan.search!;
      expect(search).toBeDefined();
      for (const peak of plan.predicted.peakMemoryBytes) expect(peak).toBeLessThanOrEqual(plan.cluster.memoryBytes);
      expect(search.stats.evaluated + search.stats.pruned).toBe(search.stats.candidates);
      // Rejected candidates come first (ranked higher, their memory plans did not fit), then the chosen one.
      const standing = search.candidates.filter((x) => x.status !== "rejected");
      expect(standing[0]!.status).toBe("chosen");
      expect(standing[0]!.settings).toBe(search.chosen);
      expect(standing.slice(1).every((x) => x.status === "alternative")).toBe(true);
      const simulated = standing.map((x) => x.simulatedStepSeconds!);
      expect(simulated.every((s) => Number.isFinite(s))).toBe(true);
      // Ranked by simulated step time; within 0.1% (a tie for the cost model) by memory instead.
      for (let i = 1; i < simulated.length; i++) expect(simulated[i]!, search.candidates[i]!.settings).toBeGreaterThanOrEqual(simulated[i - 1]! * (1 - 1e-3));
      expect(plan.settings.stages * plan.settings.dataParallel * plan.settings.tensorParallel).toBe(c.devices);
    });
  }

  it("snapshot: test/golden/search-choices.txt", () => {
    golden("search-choices.txt", CASES.map(line).join("\n") + "\n");
  });

  it("the search's simulated step of every chosen plan is within 5% of the compiled plan's", () => {
    // The search ranks by its simulation; compile's plan is exact. Pipelined FSDP's gathers that wait behind a
    // stage's receives, and interleaved chunks' once-per-step all-reduces in the cooldown, are what it once
    // missed (llama-70b on h200 × 1024: 1.088; gpt3-175b forced to pp=8 × tp=8 interleaved: 0.84).
    for (const c of CASES) {
      const compiled = chosen(c);
      const simulated = compiled.plan.search!.candidates.find((x) => x.status === "chosen")!.simulatedStepSeconds!;
      expect(simulated / compiled.prediction.stepTime, label(c)).toBeGreaterThan(0.95);
      expect(simulated / compiled.prediction.stepTime, label(c)).toBeLessThan(1.05);
    }
  });

  it("the search's memory estimate of each chosen plan of a model over 1B parameters is within 10% of its memory plan", () => {
    // FSDP's units in flight counted once per device, not once per virtual stage; the root unit held, the
    // inner ones as wide as the largest (the estimate was 1.21–1.26× on llama-70b's interleaved plans).
    // gpt2-124m's estimate adds peaks its plan reaches in different layers (activations at the backward's
    // start, unsharded gradients later): 1.01–1.10× its 1.4–26 GiB (fsdp-working.test.ts checks the 64-GPU one).
    for (const c of CASES.filter((x) => x.name === "llama-7b" || x.name === "llama-70b" || x.name === "gpt3-175b")) {
      const compiled = chosen(c);
      const estimate = compiled.plan.search!.candidates.find((x) => x.status === "chosen")!.estimatedMemoryBytes;
      const arena = Math.max(...compiled.memory.map((m) => m.arenaBytes));
      expect(estimate / arena, label(c)).toBeGreaterThan(0.95);
      expect(estimate / arena, label(c)).toBeLessThan(1.1);
    }
  });

  it("a small model on a few devices prefers data parallelism: gpt-tiny and gpt2-124m on h100-sxm × 8 choose pp=1", () => {
    for (const name of ["gpt-tiny", "gpt2-124m"] as const) {
      const s = chosen(find(name, "h100-sxm", 8)).plan.settings;
      expect(s.stages, name).toBe(1);
      expect(s.dataParallel, name).toBe(8);
    }
  });

  it("a model too large for one device is split: llama-7b on h100-sxm × 8 does not keep whole replicas unsharded", () => {
    // Mixed Adam with fp32 gradients keeps 18 bytes per parameter: 121 GB for 7B, more than one 80 GB device. The sample fixes
    // shard = fsdp; left to the search, unsharded whole replicas must still lose.
    const r = checkFile(samplePath("llama-7b"), { overrides: ["parallel.shard=auto"] });
    const s = compileModel(r.model!, { cluster: "h100-sxm", devices: 8, source: "llama-7b", fsmVersion: "test" }).plan.settings;
    expect(s.stages === 1 && s.shard === "none").toBe(false);
  });

  it("a model too large for one device is split: every candidate the search keeps for llama-70b on h100-sxm × 64 pipelines or shards it", () => {
    const m = model("llama-70b");
    const training = buildTrainingGraph(m.graph, m.train!);
    const result = searchPlans({ training, train: m.train!, parallel: m.parallel, cluster: clusterFor("h100-sxm", 64) });
    expect(result.ranked.length).toBeGreaterThan(0);
    for (const e of result.ranked) expect(e.candidate.stages > 1 || e.candidate.shard !== "none").toBe(true);
  });
});
