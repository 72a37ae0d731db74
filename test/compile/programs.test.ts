// The programs compile builds: shard collectives where the shard plan puts them, tied all-reduces and the
// gradient-norm all-reduce as rendezvous, the optimizer step after every gradient, and the engine's rules.
import { describe, expect, it } from "vitest";
import { runPrograms } from "../../src/compile/engine.js";
import { newAction, type Program } from "../../src/compile/program.js";
import { actionFromText } from "../../src/schedule/action.js";
import { compileSample } from "./helpers.js";

const kinds = (p: Program) => p.actions.map((a) => a.action.kind);
const count = (p: Program, kind: string) => kinds(p).filter((k) => k === kind).length;

describe("collectives in the programs", () => {
  it("fsdp: per unit and micro-batch a reduce-scatter, and gathers gating the layers that need them", () => {
    const m = 4;
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: m, shard: "fsdp", no_sync: false, reshard_after_forward: true, fsdp_min_params: 1000 });
    c.programs.forEach((prog, p) => {
      const plan = c.shards[c.stages.findIndex((s) => s.pipeRank === p)]!;
      const rs = plan.collectives.filter((x) => x.kind === "REDUCE_SCATTER").length;
      expect(count(prog, "REDUCE_SCATTER")).toBe(rs * m);
      const gathers = prog.actions.map((a, id) => [a, id] as const).filter(([a]) => a.action.kind === "ALL_GATHER");
      expect(gathers.length).toBeGreaterThan(0);
      // Every gather gates exactly one layer of one compute action.
      for (const [, id] of gathers) expect(prog.actions.filter((a) => a.gates.some(([, g]) => g === id)).length).toBe(1);
    });
  });

  it("oss: bucket all-reduces once per step, broadcasts after the optimizer step, which waits for the norm all-reduce", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "oss" });
    const prog = c.programs[0]!;
    const plan = c.shards[0]!;
    const opt = prog.actions.findIndex((a) => a.action.kind === "OPTIMIZER");
    const broadcasts = prog.actions.filter((a) => a.action.kind === "BROADCAST");
    expect(broadcasts.length).toBe(plan.broadcastBuckets.length);
    expect(broadcasts.every((b) => b.deps.includes(opt))).toBe(true);
    const norm = prog.actions.findIndex((a) => a.collective?.of === "gradNorm");
    expect(prog.actions[opt]!.deps).toContain(norm);
    // The norm all-reduce is one rendezvous of every program.
    expect(c.rendezvous[prog.actions[norm]!.rendezvous]!.members.length).toBe(2);
    // It follows every gradient collective on the comm stream (a stream runs in order).
    const pos = (id: number) => prog.comm.indexOf(id);
    prog.actions.forEach((a, id) => {
      if (a.collective?.of === "gradBucket" || a.collective?.of === "tiedGrad") expect(pos(id)).toBeLessThan(pos(norm));
    });
  });

  it("a tied weight's all-reduce joins replica r of both stages, after (oss) or before (fsdp) the stage's reduction", () => {
    const oss = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "oss" });
    const tied = oss.programs.map((p) => p.actions.filter((a) => a.collective?.group === "tied"));
    expect(tied.map((t) => t.length)).toEqual([1, 1]);
    expect(tied[0]![0]!.rendezvous).toBe(tied[1]![0]!.rendezvous);
    // reductionFirst: it waits for the bucket all-reduce carrying the weight.
    expect(tied[0]![0]!.deps.some((d) => oss.programs[0]!.actions[d]!.collective?.of === "gradBucket")).toBe(true);
    const fsdp = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", no_sync: false });
    const prog = fsdp.programs[0]!;
    const t = prog.actions.map((a, id) => [a, id] as const).filter(([a]) => a.collective?.group === "tied");
    expect(t.length).toBe(2);
    // tiedFirst: the unit's reduce-scatter of each micro-batch waits for that micro-batch's tied all-reduce.
    for (const [a, id] of t) {
      const rs = prog.actions.find((x) => x.action.kind === "REDUCE_SCATTER" && x.action.mb === a.action.mb && x.deps.includes(id));
      expect(rs).toBeDefined();
    }
  });

  it("a single device needs no communication at all", () => {
    const c = compileSample("gpt-tiny", "cpu", { stages: 1, data_parallel: 1, chunks: 2, shard: "fsdp", no_sync: false });
    expect(c.programs[0]!.comm).toEqual([]);
    expect(c.plan.predicted.exposedCommSeconds).toBe(0);
    expect(c.plan.predicted.bubbleFraction).toBeCloseTo(0, 9);
  });
});

describe("the engine", () => {
  const prog = (actions: ReturnType<typeof newAction>[], compute: number[], comm: number[]): Program => ({ pipeRank: 0, stages: [0], ranks: [0], actions, compute, comm });

  it("runs layers in order, holds a gated layer until its collective ends, and starts a partial dependency mid-action", () => {
    const f = newAction({ action: actionFromText("0F0"), stream: "compute", layers: [0, 1, 2], seconds: [1, 1, 1] });
    const gather = newAction({ action: actionFromText("0ALL_GATHER0u0"), stream: "comm", seconds: [5] });
    const reduce = newAction({ action: actionFromText("0REDUCE_SCATTER0u0"), stream: "comm", seconds: [1], partial: [[0, 0]] });
    f.gates.push([1, 1]);
    const run = runPrograms([prog([f, gather, reduce], [0], [1, 2])], []);
    expect(run.complete).toBe(true);
    const r = run.programs[0]!;
    expect([...r.segEnd[0]!]).toEqual([1, 6, 7]);
    expect([r.start[2], r.end[2]]).toEqual([5, 6]);
    expect(r.computeBusy).toBe(3);
  });

  it("starts a rendezvous together and reports a stuck one", () => {
    const send = newAction({ action: actionFromText("0SEND_F0@1"), stream: "comm", seconds: [2], rendezvous: 0 });
    const recv = newAction({ action: actionFromText("1RECV_F0@0"), stream: "comm", seconds: [2], rendezvous: 0 });
    const late = newAction({ action: actionFromText("1F1"), stream: "compute", layers: [0], seconds: [3] });
    const a = prog([send], [], [0]);
    const b = prog([late, recv], [0], [1]);
    recv.deps.push(0);
    const run = runPrograms([a, b], [{ members: [{ program: 0, action: 0 }, { program: 1, action: 1 }] }]);
    expect([run.programs[0]!.start[0], run.programs[1]!.start[1]]).toEqual([3, 3]);
    // A partner that never reaches the front of its comm stream: the SEND waits forever.
    const alone = prog([newAction({ action: actionFromText("1F0"), stream: "compute", layers: [0], seconds: [1] })], [0], []);
    const stuck = runPrograms([a, alone], [{ members: [{ program: 0, action: 0 }, { program: 1, action: 0 }] }]);
    expect(stuck.complete).toBe(false);
    expect(stuck.stuck.join()).toContain("program 0 comm: 0SEND_F0@1");
  });
});
