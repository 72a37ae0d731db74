// parallel.layer_checkpoint: per-layer activation checkpointing as FSDP users know it (checkpoint_wrapper on
// the blocks), independent of `checkpoint` (FairScale Pipe's whole-stage recompute): `all` recomputes every
// repeat-stack layer inside its own backward, `none` none beyond @checkpoint, `auto` what the search needs.
import { describe, expect, it } from "vitest";
import { join } from "node:path";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { compileSample, root, samplePath, sets } from "./helpers.js";

/** samples/llama-70b.fsm on 1,024 H200s (not among the helpers' samples): the search picks selective there. */
function llama70b(overrides: Record<string, string>) {
  const model = checkFile(join(root, "samples", "llama-70b.fsm"), { overrides: sets(overrides) }).model!;
  return compileModel(model, { cluster: "h200", devices: 1024, source: "llama-70b", fsmVersion: "test" }).plan.settings;
}

describe("parallel.layer_checkpoint", () => {
  const fsdp = { stages: 1, data_parallel: 4, chunks: 2, shard: "fsdp", checkpoint: "never" };

  it("all: every layer of the repeat stack is checkpointed (as @checkpoint), nothing else; the plan needs less memory", () => {
    const all = compileSample("gpt-tiny", "cpu", { ...fsdp, layer_checkpoint: "all" }, 4).plan;
    const none = compileSample("gpt-tiny", "cpu", { ...fsdp, layer_checkpoint: "none" }, 4).plan;
    expect(all.graph.layers.filter((l) => l.annotations.checkpoint).map((l) => l.name)).toEqual(["layers.0", "layers.1"]);
    expect(none.graph.layers.some((l) => l.annotations.checkpoint)).toBe(false);
    expect(Math.max(...all.predicted.peakMemoryBytes)).toBeLessThan(Math.max(...none.predicted.peakMemoryBytes));
  });

  it("all: recomputing changes no value — the same losses as without, bit for bit", async () => {
    const losses = async (mode: string) => {
      const out: number[] = [];
      await runPlan(compileSample("gpt-tiny", "cpu", { ...fsdp, layer_checkpoint: mode }, 4).plan, { steps: 3, onStep: (r) => out.push(r.loss) });
      return out;
    };
    expect(await losses("all")).toEqual(await losses("none"));
  });

  it("none: the search recomputes no layer (no selective candidate), where auto would", () => {
    const auto = llama70b({});
    expect(auto.recomputeLayers!.length).toBeGreaterThan(0); // the snapshot's choice (test/golden/search-choices.txt)
    const none = llama70b({ layer_checkpoint: "none" });
    expect(none.recomputeLayers ?? []).toEqual([]);
  });

  it("checkpoint = selective: no whole-stage recompute; the search recomputes whole only the layers memory needs", () => {
    const selective = llama70b({ checkpoint: "selective" });
    expect(selective.checkpoint).toBe("never");
    expect(selective.recomputeLayers!.length).toBeGreaterThan(0); // 1,024 H200s need some (as auto chooses)
    // On a model that fits without any, selective recomputes none: the same plan as never.
    const small = compileSample("gpt-tiny", "cpu", { ...fsdp, checkpoint: "selective" }, 4).plan.settings;
    expect(small.checkpoint).toBe("never");
    expect(small.recomputeLayers ?? []).toEqual([]);
  });

  it("refuses another value with a located error", () => {
    const r = checkFile(samplePath("gpt-tiny"), { overrides: sets({ layer_checkpoint: "some" }) });
    expect(r.model).toBeUndefined();
    const d = r.diagnostics.find((x) => /layer_checkpoint/.test(x.message));
    expect(d, r.diagnostics.map((x) => x.message).join("\n")).toBeDefined();
  });
});
