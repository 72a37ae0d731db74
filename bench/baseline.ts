// bench/baseline: this checkout's 1-device step time against another checkout's (an earlier commit built with
// `npm ci`: `git worktree add /tmp/old COMMIT && (cd /tmp/old && npm ci)`), each engine in its own process,
// the two interleaved for ROUNDS rounds so the machine's noise falls on both alike. Prints one JSON object:
// per model the medians of each side's per-round medians and their ratio. Run with
// `FSM_BASELINE=/tmp/old FSM_BASELINE_ENGINE=native-fused npm run bench:baseline` (the baseline's engine
// defaults to native; this checkout always runs native).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROUNDS = 5;
const STEPS = 300; // per round and side; the first WARMUP are not timed
const WARMUP = 20;
const MODELS = ["mlp", "gpt-tiny"];

const baseline = process.env.FSM_BASELINE;
if (!baseline) {
  console.error("set FSM_BASELINE to another fsm checkout built with npm ci (see the header of bench/baseline.ts)");
  process.exit(2);
}
const baselineEngine = process.env.FSM_BASELINE_ENGINE ?? "native";

// One process per measurement: the two checkouts' dist/ and addons never share a process.
const script = join(tmpdir(), `fsm-baseline-${process.pid}.mjs`);
writeFileSync(
  script,
  `const [root, engine, model] = process.argv.slice(2);
const { checkFile } = await import(root + "/dist/src/check/check.js");
const { compileModel } = await import(root + "/dist/src/compile/compile.js");
const { runPlan } = await import(root + "/dist/src/runtime/run-loop.js");
const m = checkFile(root + "/samples/" + model + ".fsm", { overrides: ["parallel.stages=1", "parallel.chunks=1", "parallel.checkpoint=never"] }).model;
const plan = compileModel(m, { cluster: "cpu", devices: 1, source: model, fsmVersion: "bench" }).plan;
const times = [];
await runPlan(plan, { steps: ${STEPS}, engine, onStep: (r) => times.push(r.seconds) });
const warm = times.slice(${WARMUP}).sort((a, b) => a - b);
console.log(warm[warm.length >> 1] * 1e3);
`,
);

function medianMs(root: string, engine: string, model: string): number {
  const r = spawnSync(process.execPath, [script, root, engine, model], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${root} ${engine} ${model}: ${r.stderr.trim()}`);
  return Number(r.stdout.trim());
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const here = resolve(".");
const cases = MODELS.map((model) => {
  const mine: number[] = [];
  const theirs: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    theirs.push(medianMs(resolve(baseline), baselineEngine, model));
    mine.push(medianMs(here, "native", model));
  }
  return { model, stepMs: { native: Number(median(mine).toFixed(4)), baseline: Number(median(theirs).toFixed(4)) }, rounds: { native: mine.map((x) => Number(x.toFixed(4))), baseline: theirs.map((x) => Number(x.toFixed(4))) }, nativeOverBaseline: Number((median(mine) / median(theirs)).toFixed(3)) };
});
console.log(JSON.stringify({ bench: "baseline", baseline: resolve(baseline), baselineEngine, rounds: ROUNDS, steps: STEPS, cases }));
