// What the benches that compare fsm with another framework in child processes share (bench/fairscale.ts,
// bench/pytorch-sizes.ts): a child that trains a plan and prints its steps' wall and CPU milliseconds, a
// snapshot of the native addon the children load, and the small statistics and JSON reading around them.
import { spawnSync } from "node:child_process";
import { copyFileSync } from "node:fs";
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
