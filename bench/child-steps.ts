// What the benches that compare fsm with another framework in child processes share (bench/fairscale.ts,
// bench/pytorch-sizes.ts): a child that trains a plan and prints its steps' wall and CPU milliseconds, a
// snapshot of the native addon the children load, and the small statistics and JSON reading around them.
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { nativeAddonPath } from "../src/native/binding.js";
import type { Plan } from "../src/plan/plan.js";
import { runPlan } from "../src/runtime/run-loop.js";

export const round = (x: number, digits = 3): number => Number(x.toFixed(digits));

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The last line of a child's stdout, parsed. */
export const lastJson = (stdout: string): unknown => JSON.parse(stdout.trim().split("\n").pop()!);

/** What a child prints: the kept steps' wall and CPU ms, and its fullest device's arena with the plan's
 *  prediction for that device. */
export interface ChildSteps {
  readonly stepsMs: number[];
  readonly cpuStepsMs: number[];
  readonly arenaBytes: number;
  readonly predictedArenaBytes: number;
}

/** Child: trains `plan` on the native engine and prints the kept steps' wall ms and this process's CPU ms
 *  (user + system) from one step's end to the next's — at 1 thread close to the work a step costs, which a
 *  loaded machine disturbs less than wall time — and its fullest device's arena against the prediction. */
export async function printChildSteps(plan: Plan, warmup: number, steps: number): Promise<void> {
  const times: number[] = [];
  const cpu: number[] = [];
  let last = process.cpuUsage();
  const summary = await runPlan(plan, {
    steps: warmup + steps,
    engine: "native",
    onStep: (r) => {
      const now = process.cpuUsage();
      times.push(r.seconds * 1e3);
      cpu.push((now.user - last.user + now.system - last.system) / 1e3);
      last = now;
    },
  });
  const arenas = summary.peakMemoryBytes ?? [];
  const fullest = arenas.indexOf(Math.max(...arenas));
  const out: ChildSteps = {
    stepsMs: times.slice(warmup).map((t) => round(t)),
    cpuStepsMs: cpu.slice(warmup).map((t) => round(t)),
    arenaBytes: arenas[fullest] ?? 0,
    predictedArenaBytes: summary.predictedPeakMemoryBytes[fullest] ?? 0,
  };
  console.log(JSON.stringify(out));
}

/** A plan file a parent wrote for its children: the parent's plan object as JSON (a bench's own hand-off, not
 *  a plan file a user loads: no hash, no validation), and the step it predicts (what sizes the warm-up). */
export interface ChildPlan {
  readonly file: string;
  readonly predictedStepSeconds: number;
}

/** Child side of stepsInChildren: `--child FILE WARMUP STEPS` trains the file's plan (printChildSteps). */
export async function childFromArgs(argv: readonly string[]): Promise<void> {
  await printChildSteps(JSON.parse(readFileSync(argv[1]!, "utf8")) as Plan, Number(argv[2]), Number(argv[3]));
}

/** Each plan in a process of its own as `fsm run` is, in `rounds` interleaved rounds (a shared machine's
 *  bursts of other work land on every plan alike), each round a fresh process (`script --child FILE N N`,
 *  loading `addon`) that warms up for about a fifth of a second of steps (at least `steps`: a fresh executor's
 *  first dozens of sub-millisecond steps are 2–3× the steady one, its JavaScript not yet optimized) and then
 *  records as many. Per plan, what each round printed. */
export function stepsInChildren(script: string, addon: string, plans: readonly ChildPlan[], rounds: number, steps: number, name: (i: number) => string): ChildSteps[][] {
  const out = plans.map(() => [] as ChildSteps[]);
  for (let round = 0; round < rounds; round++) {
    plans.forEach((p, i) => {
      const n = Math.max(steps, Math.min(1000, Math.ceil(0.2 / p.predictedStepSeconds)));
      const r = spawnSync(process.execPath, [script, "--child", p.file, String(n), String(n)], { encoding: "utf8", env: { ...process.env, FSM_NATIVE_PATH: addon }, timeout: 600_000 });
      if (r.status !== 0) throw new Error(`${name(i)} failed: ${r.stderr}`);
      out[i]!.push(lastJson(r.stdout) as ChildSteps);
    });
  }
  return out;
}

/** A copy of the native addon as it is now, which the children load (FSM_NATIVE_PATH), so a rebuild of
 *  native/build during the run changes nothing mid-comparison; retried while a rebuild leaves it unloadable. */
export function snapshotAddon(dir: string): string {
  const from = nativeAddonPath();
  const to = join(dir, "fsm_native.node");
  for (let attempt = 0; ; attempt++) {
    try {
      copyFileSync(from, to);
      const r = spawnSync(process.execPath, ["-e", `process.dlopen({ exports: {} }, ${JSON.stringify(to)})`]);
      if (r.status === 0) return to;
    } catch {
      // a rebuild in progress
    }
    if (attempt >= 20) throw new Error(`the native addon at ${from} does not load (npm run build:native)`);
    spawnSync("sleep", ["15"]);
  }
}
