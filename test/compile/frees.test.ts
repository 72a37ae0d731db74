// FSDP FREE actions in compiled programs: one per ALL_GATHER, on the compute stream after the last compute
// action using the unit, depending on it and on the gather; zero time, so predictions and memory are those
// of the programs without them; and the plan that carries them loads back unchanged.
import { describe, expect, it } from "vitest";
import type { Compiled } from "../../src/compile/compile.js";
import { runPrograms } from "../../src/compile/engine.js";
import type { Program } from "../../src/compile/program.js";
import { parsePlan } from "../../src/verify/load.js";
import { planToJson } from "../../src/plan/serialize.js";
import { formatAction } from "../../src/schedule/action.js";
import { compileSample } from "./helpers.js";

const ids = (prog: Program, kind: string): number[] => prog.actions.flatMap((a, id) => (a.action.kind === kind ? [id] : []));

/** Every gather has exactly one FREE of the same stage, micro-batch and unit, placed right after the compute
 *  action (or the FREEs right after it) that the FREE depends on. Returns the FREE per gather. */
function checkFrees(c: Compiled): Map<string, number>[] {
  return c.programs.map((prog) => {
    const freeOf = new Map<string, number>();
    const frees = ids(prog, "FREE");
    for (const g of ids(prog, "ALL_GATHER")) {
      const mine = frees.filter((f) => prog.actions[f]!.deps.includes(g));
      expect(mine.length, formatAction(prog.actions[g]!.action)).toBe(1);
      const f = prog.actions[mine[0]!]!;
      expect(f.action).toEqual({ ...prog.actions[g]!.action, kind: "FREE" });
      expect(f.stream).toBe("compute");
      expect(f.seconds).toEqual([0]);
      const user = f.deps.find((d) => d !== g)!;
      // Right after its compute action, other FREEs in between at most.
      const at = prog.compute.indexOf(mine[0]!);
      const userAt = prog.compute.indexOf(user);
      expect(userAt).toBeGreaterThanOrEqual(0);
      expect(userAt).toBeLessThan(at);
      for (const x of prog.compute.slice(userAt + 1, at)) expect(prog.actions[x]!.action.kind).toBe("FREE");
      // The gathered unit's buffer ends in that action (part-way, at toLayer), as before FREEs existed.
      const p = c.programs.indexOf(prog);
      const buffer = c.memory[p]!.buffers.find((b) => b.kind === "gathered" && b.from === g)!;
      expect(buffer.to).toBe(user);
      freeOf.set(`${g}`, mine[0]!);
    }
    expect(freeOf.size).toBe(frees.length);
    return freeOf;
  });
}

/** The programs with their FREEs taken off the streams run exactly as the ones with them. */
function checkZeroTime(c: Compiled): void {
  const without = c.programs.map((p) => ({ ...p, compute: p.compute.filter((id) => p.actions[id]!.action.kind !== "FREE") }));
  const run = runPrograms(without, c.rendezvous);
  expect(run.complete).toBe(true);
  expect(run.makespan).toBe(c.prediction.stepTime);
  c.programs.forEach((prog, p) => {
    prog.actions.forEach((a, id) => {
      if (a.action.kind !== "FREE") expect(run.programs[p]!.end[id], formatAction(a.action)).toBe(c.prediction.run.programs[p]!.end[id]);
    });
  });
}

describe("FSDP FREE actions", () => {
  it("reshard_after_forward=true: each gather is freed once, later on the same program; times unchanged", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", reshard_after_forward: true, fsdp_min_params: 1000 });
    const frees = checkFrees(c);
    expect(frees.every((m) => m.size > 0)).toBe(true);
    // Non-root units are gathered and freed around the forward and again around the backward of each micro-batch.
    for (const prog of c.programs) {
      const forwardFrees = ids(prog, "FREE").filter((f) => prog.actions[prog.actions[f]!.deps[0]!]!.action.kind === "F");
      expect(forwardFrees.length).toBeGreaterThan(0);
    }
    checkZeroTime(c);
  });

  it("reshard_after_forward=false: each unit is gathered and freed once per step, after the last backward", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 4, shard: "fsdp", reshard_after_forward: false, fsdp_min_params: 1000 });
    checkFrees(c);
    for (const prog of c.programs) {
      const per = new Map<string, number>();
      for (const id of [...ids(prog, "ALL_GATHER"), ...ids(prog, "FREE")]) {
        const a = prog.actions[id]!.action;
        expect(a.mb).toBeUndefined();
        const key = `${a.kind} ${a.stage} ${a.unit}`;
        per.set(key, (per.get(key) ?? 0) + 1);
      }
      expect(per.size).toBeGreaterThan(0);
      for (const [key, n] of per) expect(n, key).toBe(1);
      for (const f of ids(prog, "FREE")) expect(prog.actions[prog.actions[f]!.deps[0]!]!.action.kind).toMatch(/^[BI]$/);
    }
    checkZeroTime(c);
  });

  it("the plan carries the FREEs and loads back unchanged", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", reshard_after_forward: true, fsdp_min_params: 1000 });
    const texts = c.plan.programs.flatMap((p) => p.actions.filter((a) => a.text.includes("FREE")));
    expect(texts.length).toBeGreaterThan(0);
    for (const a of texts) {
      expect(a.text).toMatch(/^\d+FREE\d*u\d+$/);
      expect(a.stream).toBe("compute");
      expect(a.end).toBe(a.start);
    }
    expect(parsePlan(planToJson(c.plan))).toEqual(c.plan);
  });
});
