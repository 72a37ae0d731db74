// bench/schedule: generate + lower + validate + simulate time for large pipelines (p = 32, m = 256).
// Prints one JSON object; run with `node dist/bench/schedule.js` after `npm run build`. Aim: well under a
// second per schedule for the whole chain.
import { uniformCosts } from "../src/schedule/costs.js";
import { lower } from "../src/schedule/lower.js";
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
console.log(JSON.stringify({ bench: "schedule", node: process.version, costs: "uniform f=1 b=2 w=1 comm=0.1", results }, null, 2));
