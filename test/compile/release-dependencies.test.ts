// The release dependencies: every transfer or collective that ends a buffer's life is waited for by the first
// compute layer that starts after its predicted end (or already was, through the stream order), and adding
// those waits changes no predicted time.
import { describe, expect, it } from "vitest";
import type { Compiled } from "../../src/compile/compile.js";
import { predictStep } from "../../src/compile/simulate.js";
import { compileSample, type SampleName } from "./helpers.js";

/** For each compute segment in stream order: the latest comm-stream position it has waited for by then. */
function waitedPositions(c: Compiled, p: number): { start: number; waited: number }[] {
  const prog = c.programs[p]!;
  const run = c.prediction.run.programs[p]!;
  const pos = new Map(prog.comm.map((a, i) => [a, i] as const));
  const out: { start: number; waited: number }[] = [];
  let waited = -1;
  for (const k of prog.compute) {
    const a = prog.actions[k]!;
    for (let s = 0; s < Math.max(1, a.layers.length); s++) {
      if (s === 0) for (const d of a.deps) waited = Math.max(waited, pos.get(d) ?? -1);
      for (const [l, x] of a.gates) if (l === a.layers[s]) waited = Math.max(waited, pos.get(x) ?? -1);
      out.push({ start: run.segStart[k]![s]!, waited });
    }
  }
  return out;
}

const CASES: [SampleName, Record<string, string | number>, number][] = [
  ["gpt-tiny", { stages: 4, data_parallel: 1, chunks: 4, shard: "none", schedule: "1f1b", "train.batch": 16, checkpoint: "always" }, 4],
  ["gpt-tiny", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", schedule: "1f1b", checkpoint: "never" }, 4],
  ["mlp", { stages: 2, data_parallel: 2, chunks: 2, shard: "sddp", checkpoint: "never" }, 4],
];

describe("release dependencies", () => {
  for (const [name, o, devices] of CASES) {
    it(`${name} ${JSON.stringify(o)}: each freeing collective is waited for by the next compute after it ends`, () => {
      const c = compileSample(name, "cpu", o, devices);
      let checked = 0;
      c.memory.forEach((m, p) => {
        const prog = c.programs[p]!;
        const run = c.prediction.run.programs[p]!;
        const segments = waitedPositions(c, p);
        for (const b of m.buffers) {
          if (b.toLayer !== undefined || prog.actions[b.to]!.stream !== "comm") continue;
          const next = segments.find((s) => s.start > run.end[b.to]!);
          if (!next) continue;
          expect(next.waited, `${b.name}: freed by ${prog.actions[b.to]!.action.kind}`).toBeGreaterThanOrEqual(prog.comm.indexOf(b.to));
          checked++;
        }
      });
      expect(checked).toBeGreaterThan(0);
      // The predicted run already met every added wait: simulating again gives the same step.
      expect(predictStep(c.programs, c.rendezvous).stepTime).toBe(c.prediction.stepTime);
    });
  }
});
