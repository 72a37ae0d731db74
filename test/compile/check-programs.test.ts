// Compiled programs pass the shared schedule validator (src/schedule/validate.ts) as one pipeline replica,
// and a broken program is reported as a compiler bug with the rank × step picture.
import { describe, expect, it } from "vitest";
import { checkPrograms, programsSchedule } from "../../src/compile/check-programs.js";
import type { Plan } from "../../src/plan/plan.js";
import { validate } from "../../src/schedule/validate.js";
import { compileSample, type SampleName } from "./helpers.js";

type Case = readonly [SampleName, string, Readonly<Record<string, string | number | boolean>>];

// The cheap shapes of samples.test.ts and the other tests here; compile itself runs the check on every plan,
// so every sample compiled anywhere in test/compile is validated as well.
const CASES: readonly Case[] = [
  ["mlp", "cpu", { stages: 2, data_parallel: 2, chunks: 4 }],
  ["mlp", "cpu", { stages: 2, data_parallel: 1, chunks: 4, schedule: "zero_bubble", shard: "none", checkpoint: "always" }],
  ["gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", no_sync: false }],
  ["gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", no_sync: false, reshard_after_forward: true, fsdp_min_params: 1000, checkpoint: "always" }],
  ["gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 4, schedule: "interleaved", virtual_stages: 2, shard: "fsdp", no_sync: false, fsdp_min_params: 1000 }],
  ["gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, schedule: "interleaved", virtual_stages: 2, shard: "sddp" }],
  ["gpt-tiny", "h100-sxm", { stages: 2, data_parallel: 32, chunks: 2, shard: "oss", "train.batch": 128 }],
  ["gpt-tiny", "h200", { stages: 4, data_parallel: 256, chunks: 4, shard: "sddp", schedule: "gpipe", "train.batch": 1024 }],
];

/** A plan whose programs a test may edit. */
interface Editable {
  programs: { streams: { comm: number[] }; actions: { text: string; deps: number[]; collective?: { group: string } }[] }[];
}
const editable = (plan: Plan): Editable => structuredClone(plan) as unknown as Editable;

describe("compiled programs under the shared schedule validator", () => {
  const fsdp = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", no_sync: false, reshard_after_forward: true, fsdp_min_params: 1000 });

  it.each(CASES)("%s on %s %o validates", (name, cluster, overrides) => {
    const plan = compileSample(name, cluster, overrides).plan;
    const v = validate(programsSchedule(plan));
    expect(v.problems.map((p) => p.message)).toEqual([]);
  });

  it("collectives get their groups: data → [own rank] of the replicas' size, tied and world → the pipeline ranks", () => {
    const s = programsSchedule(fsdp.plan);
    const groups = new Set(s.actions.filter((a) => a.group !== undefined).map((a) => `${a.action.kind} [${a.group!.join(",")}] ${a.groupSize ?? "-"}`));
    expect(groups).toContain("ALL_GATHER [0] 2");
    expect(groups).toContain("ALL_GATHER [1] 2");
    expect(groups).toContain("ALL_REDUCE [0,1] -");
    // p2p peers are pipeline ranks and paired.
    for (const a of s.actions) if (a.action.kind.startsWith("SEND") || a.action.kind.startsWith("RECV")) expect(s.actions[a.match!]!.match).toBe(a.id);
  });

  it("mapping every FSDP prefetch gate to a whole-action wait would deadlock a real plan, so later-layer gates are left out", () => {
    const v = validate(programsSchedule(fsdp.plan, { allGates: true }));
    expect(v.ok).toBe(false);
    expect(v.problems[0]!.message).toMatch(/wait cycle: .*ALL_GATHER/);
  });

  it("two collectives of a group swapped on one program: an internal error with the picture", () => {
    const plan = editable(fsdp.plan);
    const prog = plan.programs[0]!;
    const tied = prog.streams.comm.filter((id) => prog.actions[id]!.collective?.group === "tied");
    expect(tied.length).toBeGreaterThanOrEqual(2);
    const [i, j] = [prog.streams.comm.indexOf(tied[0]!), prog.streams.comm.indexOf(tied[1]!)];
    [prog.streams.comm[i], prog.streams.comm[j]] = [prog.streams.comm[j]!, prog.streams.comm[i]!];
    expect(() => checkPrograms(plan as unknown as Plan)).toThrow(/internal: compile produced programs that fail schedule validation[\s\S]*(another order|wait cycle)[\s\S]*\[0ALL_REDUCE/);
  });

  it("a FREE without its gather dependency: an internal error with the picture", () => {
    const plan = editable(fsdp.plan);
    const prog = plan.programs[1]!;
    const free = prog.actions.find((a) => a.text.includes("FREE"))!;
    free.deps = free.deps.filter((d) => !prog.actions[d]!.text.includes("ALL_GATHER"));
    expect(() => checkPrograms(plan as unknown as Plan)).toThrow(new RegExp(`rank 1, step \\d+: ${free.text} does not depend on the [\\s\\S]*\\[${free.text}\\]`));
  });
});
