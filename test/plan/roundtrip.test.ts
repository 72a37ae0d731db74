// Plans survive writing and loading unchanged, and every action's text is canonical schedule text.
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadPlan, parsePlan } from "../../src/verify/load.js";
import { planToJson, writePlan } from "../../src/plan/serialize.js";
import { formatAction, parseAction } from "../../src/schedule/action.js";
import { compileSample } from "../compile/helpers.js";

describe("plan round trip", () => {
  const plans = [
    compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }).plan,
    compileSample("mlp", "cpu", { stages: 2, data_parallel: 1, chunks: 4, schedule: "zero_bubble", shard: "none", checkpoint: "always" }).plan,
    compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, schedule: "interleaved", virtual_stages: 2, shard: "sddp" }).plan,
  ];

  it("write → load gives back a deep-equal plan; the write is atomic (no temp file left)", () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-plan-"));
    plans.forEach((plan, i) => {
      const path = join(dir, `p${i}.plan.json`);
      const bytes = writePlan(path, plan);
      expect(bytes).toBe(Buffer.byteLength(readFileSync(path, "utf8")));
      expect(loadPlan(path)).toEqual(plan);
      // Writing over an existing plan replaces it whole.
      writePlan(path, plan);
      expect(parsePlan(readFileSync(path, "utf8"))).toEqual(plan);
    });
    expect(readdirSync(dir).sort()).toEqual(["p0.plan.json", "p1.plan.json", "p2.plan.json"]);
  });

  it("is plain JSON data: serializing again gives the same text", () => {
    for (const plan of plans) expect(planToJson(parsePlan(planToJson(plan)))).toBe(planToJson(plan));
  });

  it("every action's text parses and formats back to itself", () => {
    for (const plan of plans) {
      for (const program of plan.programs) {
        for (const a of program.actions) {
          const parsed = parseAction(a.text);
          expect(parsed.ok, a.text).toBe(true);
          if (parsed.ok) expect(formatAction(parsed.action)).toBe(a.text);
        }
      }
    }
  });
});
