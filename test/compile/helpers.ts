// Shared helpers for compile tests: compile a sample with --set style overrides, and small views of a result.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../../src/check/check.js";
import { compileModel, type Compiled } from "../../src/compile/compile.js";

export const SAMPLES = ["mlp", "gpt-tiny", "gpt2-124m", "llama-7b", "gpt3-175b"] as const;
export type SampleName = (typeof SAMPLES)[number];

export const root = resolve(fileURLToPath(import.meta.url), "../../..");
export const samplePath = (name: SampleName): string => join(root, "samples", `${name}.fsm`);

/** `{stages: 2}` → ["parallel.stages=2"]; keys with a dot (train.batch) are taken as they are. */
export function sets(o: Readonly<Record<string, string | number | boolean>>): string[] {
  return Object.entries(o).map(([k, v]) => `${k.includes(".") ? k : `parallel.${k}`}=${v}`);
}

export function compileSample(name: SampleName, cluster: string, overrides: Readonly<Record<string, string | number | boolean>>, devices?: number): Compiled {
  const result = checkFile(samplePath(name), { overrides: sets(overrides) });
  if (!result.model) throw new Error(`${name} with ${JSON.stringify(overrides)} failed to check: ${result.diagnostics.map((d) => d.message).join("; ")}`);
  return compileModel(result.model, { cluster, source: samplePath(name), fsmVersion: "0.0.0-test", ...(devices !== undefined && { devices }) });
}

/**
 * Per stage: the most micro-batches holding activations at one moment in the memory plan, a micro-batch
 * counting from the start of its forward (F) to the end of its last activation buffer (its backward).
 */
export function peakMicroBatchesInFlight(c: Compiled): number[] {
  const peaks = c.stages.map(() => 0);
  c.memory.forEach((m, p) => {
    const prog = c.programs[p]!;
    const run = c.prediction.run.programs[p]!;
    const forwardStart = new Map<string, number>();
    prog.actions.forEach((a, id) => {
      if (a.action.kind === "F") forwardStart.set(`${a.action.stage}:${a.action.mb}`, run.start[id]!);
    });
    const perMb = new Map<string, { stage: number; start: number; end: number }>();
    for (const b of m.buffers) {
      if (b.kind !== "activation" || b.stage === undefined || b.mb === undefined) continue;
      const key = `${b.stage}:${b.mb}`;
      const cur = perMb.get(key);
      const start = forwardStart.get(key)!;
      perMb.set(key, { stage: b.stage, start, end: Math.max(cur?.end ?? 0, b.end) });
    }
    const events = [...perMb.values()].flatMap((x) => [[x.stage, x.start, 1], [x.stage, x.end, -1]] as const).sort((a, b) => a[1] - b[1] || a[2] - b[2]);
    const live = new Map<number, number>();
    for (const [stage, , d] of events) {
      live.set(stage, (live.get(stage) ?? 0) + d);
      peaks[stage] = Math.max(peaks[stage]!, live.get(stage)!);
    }
  });
  return peaks;
}
