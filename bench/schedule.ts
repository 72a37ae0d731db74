// bench/schedule: generate + lower + validate + simulate time for large pipelines (p = 32, m = 256), and
// the same with the shard actions a plan adds (FSDP gathers around every pass, a data-parallel step).
// Prints one JSON object; run with `node dist/bench/schedule.js` after `npm run build`. Aim: well under a
// second per schedule for the whole chain.
import { shardAction } from "../src/schedule/action.js";
import { uniformCosts } from "../src/schedule/costs.js";
import { ScheduleEditor } from "../src/schedule/edit.js";
import { lower } from "../src/schedule/lower.js";
import type { LoweredSchedule } from "../src/schedule/lowered.js";
import { buildComputeOrder, type ScheduleSpec } from "../src/schedule/orders/build.js";
import { simulate } from "../src/schedule/simulate.js";
import { validate } from "../src/schedule/validate.js";
import { medianMs } from "./timing.js";

const costs = uniformCosts({ f: 1, b: 2, w: 1, comm: 0.1 });
const specs: ScheduleSpec[] = [
  { schedule: "gpipe", ranks: 32, microBatches: 256 },
  { schedule: "1f1b", ranks: 32, microBatches: 256 },
  { schedule: "1f1b", ranks: 32, microBatches: 256, checkpoint: "always" },
  { schedule: "zero_bubble", ranks: 32, microBatches: 256 },
  { schedule: "interleaved", ranks: 32, microBatches: 256, virtualStages: 2 },
  { schedule: "interleaved", ranks: 32, microBatches: 256, virtualStages: 4 },
];
const runs = 5;

const results = specs.map((spec) => {
  const order = buildComputeOrder(spec);
  const lowered = lower(order, { costs });
  const validation = validate(lowered);
  if (!validation.ok) throw new Error(`bench: ${JSON.stringify(spec)} is invalid: ${validation.problems[0]!.message}`);
  const report = simulate(lowered, costs);
  const timings = {
    orderMs: medianMs(() => buildComputeOrder(spec), runs),
    lowerMs: medianMs(() => lower(order, { costs }), runs),
    validateMs: medianMs(() => validate(lowered), runs),
    simulateMs: medianMs(() => simulate(lowered, costs), runs),
  };
  const totalMs = Number(Object.values(timings).reduce((a, b) => a + b, 0).toFixed(2));
  return {
    ...spec,
    actions: lowered.actions.length,
    ...timings,
    totalMs,
    stepTime: Number(report.stepTime.toFixed(2)),
    bubbleFraction: Number(report.bubbleFraction.toFixed(4)),
    exposedCommTime: Number(report.exposedCommTime.toFixed(2)),
  };
});
/**
 * What an FSDP plan with data parallelism adds, roughly as src/plan will: an ALL_GATHER of one unit before
 * every F, B, I or W (on the comm stream right after the last transfer that pass or an earlier one waits
 * for) and a FREE after it; per stage a gradient REDUCE_SCATTER among replicas outside the simulation after
 * its last backward; per rank a global-norm ALL_REDUCE over every rank; per stage an OPTIMIZER.
 */
function withShardStep(s: LoweredSchedule): LoweredSchedule {
  const ed = new ScheduleEditor(s);
  const everyRank = s.streams.map((_, r) => r);
  s.streams.forEach((st, rank) => {
    const commAt = new Map(st.comm.map((id, i) => [id, i] as const));
    const lastBackward = new Map<number, number>();
    let covered = -1;
    for (const id of st.compute) {
      const { kind, stage, mb } = s.actions[id]!.action;
      for (const d of s.actions[id]!.deps) covered = Math.max(covered, commAt.get(d) ?? -1);
      if (kind === "R") continue;
      if (kind !== "F") lastBackward.set(stage, id);
      const place = covered < 0 ? "start" : { after: st.comm[covered]! };
      const gather = ed.add({ rank, stream: "comm", action: shardAction("ALL_GATHER", stage, { mb: mb!, unit: 0 }), deps: [], group: [rank], groupSize: 8, bytes: 1 }, place);
      ed.addDeps(id, [gather]);
      ed.add({ rank, stream: "compute", action: shardAction("FREE", stage, { mb: mb!, unit: 0 }), deps: [id, gather] }, { after: id });
    }
    const grads = [...lastBackward].map(([stage, id]) =>
      ed.add({ rank, stream: "comm", action: shardAction("REDUCE_SCATTER", stage, { unit: 0 }), deps: [id], group: [rank], groupSize: 8, bytes: 4 }),
    );
    const norm = ed.add({ rank, stream: "comm", action: shardAction("ALL_REDUCE", rank), deps: grads, group: everyRank, groupSize: 8 * s.ranks, bytes: 4 });
    for (const stage of lastBackward.keys()) ed.add({ rank, stream: "compute", action: shardAction("OPTIMIZER", stage), deps: [norm] });
  });
  return ed.build();
}

const shardCosts = uniformCosts({ f: 1, b: 2, w: 1, comm: 0.1, collective: 0.2, optimizer: 0.5 });
const shardSpecs: ScheduleSpec[] = [
  { schedule: "1f1b", ranks: 32, microBatches: 256 },
  { schedule: "interleaved", ranks: 32, microBatches: 256, virtualStages: 2 },
];
const withShards = shardSpecs.map((spec) => {
  const lowered = lower(buildComputeOrder(spec), { costs: shardCosts });
  const step = withShardStep(lowered);
  const validation = validate(step);
  if (!validation.ok) throw new Error(`bench: ${JSON.stringify(spec)} with shard actions is invalid: ${validation.problems[0]!.message}`);
  const report = simulate(step, shardCosts);
  const timings = {
    editMs: medianMs(() => withShardStep(lowered), runs),
    validateMs: medianMs(() => validate(step), runs),
    simulateMs: medianMs(() => simulate(step, shardCosts), runs),
  };
  return {
    ...spec,
    actions: step.actions.length,
    ...timings,
    stepTime: Number(report.stepTime.toFixed(2)),
    exposedCommTime: Number(report.exposedCommTime.toFixed(2)),
    peakBytes: Math.max(...report.perRank.map((r) => r.peakBytes)),
  };
});
console.log(
  JSON.stringify(
    {
      bench: "schedule",
      node: process.version,
      costs: "uniform f=1 b=2 w=1 comm=0.1",
      results,
      shardCosts: "uniform f=1 b=2 w=1 comm=0.1 collective=0.2 optimizer=0.5",
      withShards,
    },
    null,
    2,
  ),
);
