// parallel.fsdp_prefetch: how many FSDP units ahead of the one computing are all-gathered (FSDP2's
// set_modules_to_forward_prefetch / backward prefetch). Planned: each gather issued that many points before
// its unit is needed; priced: more units live at once in the memory plan; honoured: the runtime issues gathers
// there, so its live peak follows.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel, type Compiled } from "../../src/compile/compile.js";
import { lower } from "../../src/lower/lower.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { checkSources } from "../check/helpers.js";
import { compileSample, sets } from "./helpers.js";

/** The most gathered units live at one moment of program 0's predicted step. */
function gatheredAtOnce(c: Compiled): number {
  const events = c.memory[0]!.buffers.filter((b) => b.kind === "gathered").flatMap((b) => [[b.start, 1] as const, [b.end, -1] as const]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let live = 0;
  let most = 0;
  for (const [, d] of events) most = Math.max(most, (live += d));
  return most;
}

describe("parallel.fsdp_prefetch", () => {
  // llama-7b on 64 H100s with 8 sequences per device: compute-bound, so gathers can run as far ahead as asked.
  const llama = (prefetch: number) => compileSample("llama-7b", "h100-sxm", { stages: 1, data_parallel: 64, shard: "fsdp", chunks: 1, checkpoint: "never", "train.batch": 512, fsdp_prefetch: prefetch }, 64);

  it("defaults to 1 (the next unit, FairScale's and FSDP's default) and is recorded in the plan", () => {
    expect(compileSample("gpt-tiny", "cpu", { stages: 1, data_parallel: 2, shard: "fsdp" }, 2).plan.settings.fsdpPrefetch).toBe(1);
    expect(llama(2).plan.settings.fsdpPrefetch).toBe(2);
  });

  it("each extra unit of depth keeps one more gathered unit live and raises the predicted peak by about a layer's weights", () => {
    const [one, two, three] = [llama(1), llama(2), llama(3)];
    expect(gatheredAtOnce(two)).toBe(gatheredAtOnce(one) + 1);
    expect(gatheredAtOnce(three)).toBe(gatheredAtOnce(one) + 2);
    // A Llama-7B block in bf16: 2 bytes × (4·4096² + 3·4096·11008 + 2·4096).
    const layer = 2 * (4 * 4096 ** 2 + 3 * 4096 * 11008 + 2 * 4096);
    const step = two.memory[0]!.peakBytes - one.memory[0]!.peakBytes;
    expect(step).toBeGreaterThan(0.9 * layer);
    expect(step).toBeLessThan(1.1 * layer);
    // What the plan reports per device (its arena) grows with it.
    expect(two.plan.predicted.peakMemoryBytes[0]!).toBeGreaterThan(one.plan.predicted.peakMemoryBytes[0]!);
  });

  it("the runtime issues each gather where the plan does: its live peak grows with the depth", () => {
    const path = resolve(import.meta.dirname, "../fixtures/models/llama-tiny.fsm");
    const src = readFileSync(path, "utf8").replace("  layers = repeat", "  @fsdp_unit\n  layers = repeat");
    const lib = resolve(import.meta.dirname, "../../samples/lib/transformer.fsm");
    const live = [1, 2, 3].map((prefetch) => {
      const model = checkSources({ [path]: src, [lib]: readFileSync(lib, "utf8") }, path, { overrides: sets({ stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp", checkpoint: "never", fsdp_prefetch: prefetch }) }).model!;
      const plan = compileModel(model, { cluster: "cpu", devices: 4, source: "test", fsmVersion: "test" }).plan;
      return lower(plan, graphFromJson(plan.model.name, plan.graph)).devices[0]!.liveBytes;
    });
    expect(live[1]!).toBeGreaterThan(live[0]!);
    expect(live[2]!).toBeGreaterThan(live[1]!);
  });

  it("refuses a depth below 1 with a located error", () => {
    const r = checkFile(resolve(import.meta.dirname, "../../samples/gpt-tiny.fsm"), { overrides: ["parallel.fsdp_prefetch=0"] });
    expect(r.model).toBeUndefined();
    expect(r.diagnostics.map((d) => d.message).join("\n")).toMatch(/fsdp_prefetch/);
  });
});
