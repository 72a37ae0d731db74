// Tensor parallelism in viz, on gpt-tiny compiled with tensor_parallel = 2: the shard map's slices (wte.weight
// rows 0..31 of 64 on tensor rank 0, the tied lm_head the same, each of q/k/v's part of the fused qkv weight),
// checked against the runtime's own slicing (graph/param-split.ts sliceForRank); replicated parameters
// marked; every device of a group counted; and the timeline's marks for the tensor-parallel collectives inside
// compute, priced independently here from the ops' collectives — present for a tp plan, absent for tp = 1.
import { describe, expect, it } from "vitest";
import { clusterFor } from "../../src/cost/cluster.js";
import { collectiveTime, intraNodeLink } from "../../src/cost/collectives.js";
import { estimateOp } from "../../src/cost/graph-cost.js";
import { sliceForRank, wholeShape } from "../../src/graph/param-split.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import type { Plan } from "../../src/plan/plan.js";
import { renderHtml } from "../../src/viz/html.js";
import { renderSvg } from "../../src/viz/svg.js";
import { renderText } from "../../src/viz/text.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import type { TensorParam, ViewModel } from "../../src/viz/view-types.js";
import { compileSample } from "../compile/helpers.js";
import { caseById, planFor, svgsOf, xmlProblems } from "./helpers.js";

const plans = new Map<string, Plan>();
/** gpt-tiny on 4 CPU devices with the given parallel settings, compiled once per test file. */
function tiny(overrides: Readonly<Record<string, string | number>>): Plan {
  const key = JSON.stringify(overrides);
  if (!plans.has(key)) plans.set(key, compileSample("gpt-tiny", "cpu", overrides, 4).plan);
  return plans.get(key)!;
}
/** 2 replicas × a tensor-parallel group of 2: ranks 0-1 and 2-3. */
const tp2 = () => tiny({ tensor_parallel: 2, stages: 1 });
/** 2 pipeline stages, each one tensor-parallel group of 2 (ranks 0-1, 2-3), recomputing in R actions. */
const tp2pp2 = () => tiny({ tensor_parallel: 2, stages: 2, data_parallel: 1, chunks: 2, checkpoint: "always" });

const row = (vm: ViewModel, stage: number, name: string): TensorParam => {
  const found = vm.shards[stage]!.tensor!.params.find((p) => p.name === name);
  if (!found) throw new Error(`no row ${name} in stage ${stage}: ${vm.shards[stage]!.tensor!.params.map((p) => p.name).join(", ")}`);
  return found;
};

/** The indices of the split axis a slice text names: `rows 0..15, 32..47 of 96` → 0..15 and 32..47. */
function indicesOf(slice: string): number[] {
  const out: number[] = [];
  for (const m of slice.matchAll(/(\d+)\.\.(\d+)/g)) for (let i = Number(m[1]); i <= Number(m[2]); i++) out.push(i);
  return out;
}

describe("viz of a tensor-parallel plan", () => {
  it("the shard map: each split parameter's slice per tensor rank, the tied head alike, the rest replicated", () => {
    const plan = tp2();
    const vm = buildViewModel(plan);
    const t = vm.shards[0]!.tensor!;
    expect(t.degree).toBe(2);
    expect(t.groups).toEqual([
      [0, 1],
      [2, 3],
    ]);
    expect(row(vm, 0, "wte.weight")).toEqual({ name: "wte.weight", shape: "64×32", split: "rows split 2 ways", slices: ["rows 0..31 of 64", "rows 32..63 of 64"] });
    // lm_head declares no weight of its own: it uses wte's, so it holds the same slice.
    expect(row(vm, 0, "lm_head.weight = wte.weight").slices).toEqual(["rows 0..31 of 64", "rows 32..63 of 64"]);
    // The fused qkv weight: each rank holds its part of each of q, k and v; the two blocks list it once.
    expect(row(vm, 0, "layers.0 .. layers.1: attn.qkv.weight")).toEqual({
      name: "layers.0 .. layers.1: attn.qkv.weight",
      shape: "96×32",
      split: "rows of each of 3 blocks split 2 ways",
      slices: ["rows 0..15, 32..47, 64..79 of 96", "rows 16..31, 48..63, 80..95 of 96"],
    });
    expect(row(vm, 0, "layers.0 .. layers.1: attn.proj.weight").slices).toEqual(["columns 0..15 of 32", "columns 16..31 of 32"]);
    for (const name of ["wpe.weight", "ln_f.weight", "layers.0 .. layers.1: ln_1.bias", "layers.0 .. layers.1: attn.proj.bias"]) {
      expect(row(vm, 0, name), name).toMatchObject({ split: "replicated", slices: [] });
    }
    // One row per parameter of a layer (both blocks read alike), plus the tied head.
    const perLayer = plan.graph.params.filter((p) => p.layer !== 2 && p.layer !== 3).length + plan.graph.layers[2]!.params.length;
    expect(t.params).toHaveLength(perLayer + 1);
    expect(t.params.filter((p) => p.split !== "replicated").length).toBe(
      plan.graph.params.filter((p) => p.split && p.layer !== 3).length + 1,
    );
  });

  it("every slice shown is the one the runtime gives the rank (sliceForRank of the whole)", () => {
    const plan = tp2();
    const vm = buildViewModel(plan);
    for (const p of plan.graph.params) {
      if (!p.split || p.layer === 3) continue;
      const name = p.layer === 2 ? `layers.0 .. layers.1: ${p.name.slice("layers.0.".length)}` : p.name;
      const local = plan.graph.tensors[p.tensor]!.shape.map(Number);
      const whole = wholeShape(local, p.split);
      // Each element of the whole parameter is its index along the split axis.
      const inner = whole.slice(p.split.axis + 1).reduce((a, b) => a * b, 1);
      const n = whole[p.split.axis]!;
      const values = Array.from({ length: whole.reduce((a, b) => a * b, 1) }, (_, i) => Math.floor(i / inner) % n);
      for (let rank = 0; rank < 2; rank++) {
        const held = [...new Set(sliceForRank(values, whole, p.split, rank))].sort((a, b) => a - b);
        expect(indicesOf(row(vm, 0, name).slices[rank]!), `${p.name} rank ${rank}`).toEqual(held);
      }
    }
  });

  it("counts every device: stage ranks, timeline and memory rows, shard members with their groups", () => {
    const plan = tp2();
    const vm = buildViewModel(plan);
    expect(vm.summary.tensorParallel).toBe(2);
    expect(vm.stages[0]!.ranks).toEqual([0, 1, 2, 3]);
    expect(vm.predicted.rows.map((r) => r.label)).toEqual(["ranks 0-3"]);
    expect(vm.memory.map((m) => m.label)).toEqual(["ranks 0-3"]);
    // Each rank of a group computes its part of every micro-batch: FLOPs per device × devices = per step.
    expect((vm.stages[0]!.flopsPerDevice * vm.stages[0]!.ranks.length) / plan.predicted.flopsPerStep).toBeCloseTo(1, 9);
    const g = vm.shards[0]!;
    expect(g.ranks).toEqual(plan.shard[0]!.ranks);
    expect(g.members.map((m) => m.devices)).toEqual([
      [0, 1],
      [2, 3],
    ]);
    const text = renderText(vm);
    // Whichever strategy the search chose for the shard group.
    expect(text).toContain(`shard ${plan.shard[0]!.strategy} over ranks 0, 2 (tensor rank 0; each tensor rank t likewise over these ranks + t)`);
    expect(text).toContain("    ranks 0-1 each  ");
    expect(text).toContain("  stage 0, tensor parallel over 2 groups of 2 ranks (0-1, 2-3): ");
    expect(text).toMatch(/\n {4}wte\.weight +64×32 +rows split 2 ways +rows 0\.\.31 of 64 +rows 32\.\.63 of 64\n/);
    expect(text).toMatch(/\n {4}wpe\.weight +16×32 +replicated\n/);
  });

  it("marks the tensor-parallel collectives inside each compute block, as the cost model prices them", () => {
    const plan = tp2();
    const vm = buildViewModel(plan);
    // The collectives of the forward ops (their backward ones come with them), each over the group of 2.
    const graph = graphFromJson(plan.model.name, plan.graph);
    const cluster = clusterFor(plan.cluster.profile, plan.cluster.devices);
    const bindings = { B: plan.settings.microBatchSize, S: plan.settings.seq! };
    const priced = { forward: 0, backward: 0 };
    for (const op of graph.ops()) {
      if (op.phase !== "forward") continue;
      const c = estimateOp(graph, op.id, { cluster, precision: "fp32", bindings }).cost.collectives;
      for (const x of c?.list ?? []) priced[x.phase] += collectiveTime(x.kind, x.bytes, 2, intraNodeLink(cluster.profile));
    }
    expect(priced.forward).toBeGreaterThan(0);
    const compute = vm.predicted.rows[0]!.lanes[0].blocks;
    expect(compute.map((b) => b.label)).toEqual(["F0", "B0", "opt"]);
    expect(compute[0]!.tpSeconds).toBeCloseTo(priced.forward, 15);
    expect(compute[1]!.tpSeconds).toBeCloseTo(priced.backward, 15);
    expect(compute[2]!.tpSeconds).toBeUndefined();
    for (const b of compute.slice(0, 2)) {
      expect(b.tpSeconds!).toBeLessThan(b.end - b.start);
      expect(b.details).toContain("tensor-parallel collectives");
    }
    expect(vm.predicted.rows[0]!.lanes[1].blocks.every((b) => b.tpSeconds === undefined)).toBe(true);

    const text = renderText(vm);
    expect(text).toContain("; tp: ~ the tensor-parallel collectives inside the compute block above");
    expect(text).toMatch(/\n {13}tp {6}\| *~+ +~+ +\|\n/);
    const html = renderHtml(vm);
    expect(html).toContain("tensor-parallel collectives inside compute");
    expect(html).toContain('<details class="shard tensor" data-tensor-stage="0" open>');
    expect(html.match(/<rect class="tp" /g)).toHaveLength(2);
    for (const svg of svgsOf(html)) expect(xmlProblems(svg)).toEqual([]);
    expect(xmlProblems(renderSvg(vm))).toEqual([]);
  });

  it("tensor and pipeline parallel: each stage's slices, the tied head on the last stage, recompute marked too", () => {
    const plan = tp2pp2();
    const vm = buildViewModel(plan);
    expect(vm.stages.map((s) => s.ranks)).toEqual([
      [0, 1],
      [2, 3],
    ]);
    expect(vm.shards.map((g) => g.tensor!.groups)).toEqual([[[0, 1]], [[2, 3]]]);
    expect(row(vm, 0, "wte.weight").slices[0]).toBe("rows 0..31 of 64");
    expect(row(vm, 1, "lm_head.weight = wte.weight").slices[0]).toBe("rows 0..31 of 64");
    expect(row(vm, 1, "layers.1.attn.qkv.weight").slices[1]).toBe("rows 16..31, 48..63, 80..95 of 96");
    // A recompute reruns the forward's collectives; every compute block but the optimizer carries some.
    const compute = vm.predicted.rows.flatMap((r) => r.lanes[0].blocks);
    expect(compute.some((b) => b.kind === "recompute")).toBe(true);
    for (const b of compute) expect(b.tpSeconds !== undefined, b.label).toBe(b.kind !== "optimizer");
    for (const r of vm.predicted.rows) {
      const f = r.lanes[0].blocks.find((b) => b.kind === "forward")!;
      const re = r.lanes[0].blocks.find((b) => b.kind === "recompute")!;
      expect(re.tpSeconds).toBe(f.tpSeconds);
    }
  });

  it("a measured step gets a row for every device of a group", () => {
    const plan = tp2();
    const spans = [0, 1, 2, 3].flatMap((device) => [
      { name: "0F0", device, stream: "compute" as const, start: 0, end: 1e-4, note: "" },
      { name: "0B0", device, stream: "compute" as const, start: 1e-4, end: 3e-4, note: "" },
    ]);
    const vm = buildViewModel(plan, { measured: { step: 1, steps: [1], stepSeconds: 4e-4, spans } });
    expect(vm.measured!.rows.map((r) => `${r.label}:${r.device}`)).toEqual(["rank 0:0", "rank 1:1", "rank 2:2", "rank 3:3"]);
    // Measured blocks are what ran: the cost model's share is drawn on the predicted step only.
    expect(vm.measured!.rows.every((r) => r.lanes[0].blocks.every((b) => b.tpSeconds === undefined))).toBe(true);
  });

  it("a plan without tensor parallelism has none of it: no tensor map, marks, lane or legend", () => {
    const vm = buildViewModel(planFor(caseById("gpt-tiny")));
    expect(vm.summary.tensorParallel).toBe(1);
    expect(vm.shards.every((g) => g.tensor === undefined && g.members.every((m) => m.devices.length === 1 && m.devices[0] === m.rank))).toBe(true);
    expect(vm.predicted.rows.every((r) => r.lanes.every((l) => l.blocks.every((b) => b.tpSeconds === undefined)))).toBe(true);
    const text = renderText(vm);
    expect(text).not.toContain("tensor");
    expect(text).not.toMatch(/^ +tp +\|/m);
    const html = renderHtml(vm);
    expect(html).not.toContain("tp-hatch");
    expect(html).not.toContain("tensor-parallel collectives");
  });
});
