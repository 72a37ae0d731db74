// bench/search: time of the plan search (src/search) alone, from the training graph, for four samples on
// H100 clusters sized to them (GPT-2 124M × 8, Llama 7B × 64, Llama 2 70B × 512, GPT-3 175B × 1024), with
// the samples' own parallel settings (whatever they leave auto is searched). Checking the file and building
// the training graph happen once, outside the timings; the first search is `coldMs`, then `medianMs` over
// repeated runs. What it chose, its counts and the families it rejected (with why) come with each case, and
// the whole compile (search, then planning the best candidates until one fits) is timed once (`compileMs`).
// Prints one JSON object; run with `node dist/bench/search.js` after `npm run build`.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel, searchTrainings } from "../src/compile/compile.js";
import { CompileError } from "../src/compile/errors.js";
import { clusterFor } from "../src/cost/cluster.js";
import { candidateText } from "../src/search/candidate.js";
import { searchPlans, type SearchResult } from "../src/search/search.js";
import { medianMs } from "./timing.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const RUNS = 5;

const cases = [
  { model: "gpt2-124m", cluster: "h100-sxm", devices: 8 },
  { model: "llama-7b", cluster: "h100-sxm", devices: 64 },
  { model: "llama-70b", cluster: "h100-sxm", devices: 512 },
  { model: "gpt3-175b", cluster: "h100-sxm", devices: 1024 },
] as const;

const results = cases.map(({ model: name, cluster: profile, devices }) => {
  const path = join(root, "samples", `${name}.fsm`);
  const checked = checkFile(path);
  const model = checked.model;
  if (!model?.train) throw new Error(`${path} failed to check: ${checked.diagnostics.map((d) => d.message).join("; ")}`);
  // One training graph per tensor-parallel degree the search may choose, as compile gives it.
  const trainings = searchTrainings(model, profile, devices);
  const cluster = clusterFor(profile, devices);
  const input = { training: trainings.values().next().value!, tensorParallel: trainings, train: model.train, parallel: model.parallel, cluster };

  let t0 = performance.now();
  let result: SearchResult = searchPlans(input);
  const coldMs = Number((performance.now() - t0).toFixed(2));
  const median = medianMs(() => void (result = searchPlans(input)), RUNS);
  const best = result.ranked[0]!;

  // The whole compile once: the search again, then the memory plans of the best candidates until one fits.
  let compile: { compileMs: number; compiled: string } | { compileMs: number; compileError: string };
  t0 = performance.now();
  try {
    const c = compileModel(model, { cluster: profile, devices, source: path, fsmVersion: "bench" });
    compile = { compileMs: Number((performance.now() - t0).toFixed(2)), compiled: c.plan.search?.chosen ?? "(no search)" };
  } catch (e) {
    if (!(e instanceof CompileError)) throw e;
    compile = { compileMs: Number((performance.now() - t0).toFixed(2)), compileError: e.message };
  }

  const { candidates, evaluated, pruned, infeasible, simulated } = result.stats;
  return {
    model: `${name}.fsm`,
    cluster: profile,
    devices,
    coldMs,
    medianMs: median,
    stats: { candidates, evaluated, pruned, infeasible, simulated },
    chosen: candidateText(best.candidate),
    estimatedStepSeconds: best.estimate,
    simulatedStepSeconds: best.simulated ?? null,
    rejectedFamilies: result.families.filter((f) => f.reason !== undefined).map((f) => ({ family: f.family, reason: f.reason! })),
    ...compile,
  };
});

console.log(JSON.stringify({ bench: "search", node: process.version, runs: RUNS, cases: results }, null, 2));
