// The completeness check: every program does exactly the collectives and optimizer steps its stages' shard
// plans call for, on plans of every sharding strategy, schedule and clipping setting.
import { describe, expect, it } from "vitest";
import { checkCompleteness } from "../../src/verify/check-completeness.js";
import type { Plan } from "../../src/plan/plan.js";
import { compileSample } from "../compile/helpers.js";
import { edited, fsdpPlan, refusal, textIndex, type Mutable } from "../plan/plan-edits.js";

/** Removes an action from its program's streams and list, renumbering nothing (the check reads texts). */
function drop(p: Mutable, program: number, text: string): void {
  const i = textIndex(p, program, text);
  const prog = p.programs[program];
  prog.actions[i].text = "0F99"; // no longer a collective, OPTIMIZER or compute action of any stage
  for (const s of ["compute", "comm"]) prog.streams[s] = (prog.streams[s] as number[]).filter((id) => id !== i);
}

const plans: [string, Plan][] = [
  ["fsdp, 2 stages × 2, tied, clipping", fsdpPlan],
  ["oss (broadcasts after the step)", compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "oss" }).plan],
  ["sddp, interleaved", compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, schedule: "interleaved", virtual_stages: 2, shard: "sddp" }).plan],
  ["none (DDP), zero bubble, recompute", compileSample("mlp", "cpu", { stages: 2, data_parallel: 2, chunks: 4, schedule: "zero_bubble", shard: "none", checkpoint: "always" }).plan],
  ["fsdp without resharding, gpipe", compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, schedule: "gpipe", shard: "fsdp", no_sync: false, reshard_after_forward: false }).plan],
  ["one device", compileSample("mlp", "cpu", { stages: 1, data_parallel: 1, chunks: 1, shard: "none" }).plan],
];

describe("checkCompleteness", () => {
  for (const [what, plan] of plans) it(`accepts a compiled plan: ${what}`, () => expect(() => checkCompleteness(plan)).not.toThrow());

  it("refuses a stage without its OPTIMIZER", () => {
    const e = refusal(() => checkCompleteness(edited(fsdpPlan, (p) => drop(p, 1, "1OPTIMIZER"))));
    expect(e.path).toBe("programs[1]");
    expect(e.reason).toMatch(/^stage 1 has no OPTIMIZER \(1OPTIMIZER\)/);
  });

  it("refuses a missing reduce-scatter at the shard collective that calls for it", () => {
    const e = refusal(() => checkCompleteness(edited(fsdpPlan, (p) => drop(p, 0, "0REDUCE_SCATTER1u0"))));
    expect(e.path).toBe("shard[0].collectives[1]");
    expect(e.reason).toBe("0REDUCE_SCATTER1u0 is missing from programs[0]: the stage's reduce_scatter of unit 0 for micro-batch 1");
  });

  it("refuses a missing tied all-reduce and a missing gradient-norm all-reduce", () => {
    expect(refusal(() => checkCompleteness(edited(fsdpPlan, (p) => drop(p, 1, "1ALL_REDUCE1u0")))).path).toBe("shard[1].tied[0]");
    expect(refusal(() => checkCompleteness(edited(fsdpPlan, (p) => drop(p, 0, "0ALL_REDUCE")))).path).toBe("settings.clipGradNorm");
  });

  it("refuses a missing broadcast after an OSS step", () => {
    const oss = plans[1]![1];
    const bcast = oss.programs[0]!.actions.find((a) => a.text.includes("BROADCAST"))!.text;
    expect(refusal(() => checkCompleteness(edited(oss, (p) => drop(p, 0, bcast)))).path).toMatch(/^shard\[0\]\.collectives\[\d+\]$/);
  });

  it("refuses a collective no shard plan calls for, and one in the wrong group", () => {
    const extra = refusal(() => checkCompleteness(edited(fsdpPlan, (p) => (p.programs[0].actions[textIndex(p, 0, "0FREEu0")].text = "0ALL_GATHER1u0"))));
    expect(extra.path).toBe(`programs[0].actions[${textIndex(fsdpPlan as Mutable, 0, "0FREEu0")}]`);
    expect(extra.reason).toMatch(/0ALL_GATHER1u0 \(a collective without its group\) is more than/);
    const group = refusal(() => checkCompleteness(edited(fsdpPlan, (p) => (p.programs[0].actions[textIndex(p, 0, "0REDUCE_SCATTER0u0")].collective.group = "world"))));
    expect(group.reason).toMatch(/a world collective of unit/);
  });
});
