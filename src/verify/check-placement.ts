// Load-time check that the plan's sections agree on where everything runs: each stage on the pipeline rank
// k mod stages, its layers the next ones after the previous stage's, every rank list the mesh's replicas of
// its pipeline rank (plan.ts: rank = pipe · dataParallel + data), and each program running exactly the stages
// of its pipeline rank. A program whose ranks or stages disagree would run on devices that hold other
// weights or talk to peers that never answer.
import { fail } from "../plan/json-check.js";
import { meshRank, type Plan } from "../plan/plan.js";

const list = (xs: readonly number[]): string => `[${xs.join(", ")}]`;
const same = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Throws PlanError at the first disagreement; the plan has passed validatePlan. */
export function checkPlacement(plan: Plan): void {
  const { stages: pipe, dataParallel: dp, tensorParallel: tp } = plan.settings;
  const replicas = (p: number): number[] => Array.from({ length: dp }, (_, r) => meshRank(plan.settings, p, r));
  const why = (p: number): string => `the replicas of pipeline rank ${p} (rank = ${tp === 1 ? "" : "("}pipe × ${dp} + data${tp === 1 ? "" : `) × ${tp}`})`;
  let nextLayer = 0;
  plan.stages.forEach((s, k) => {
    const path = `stages[${k}]`;
    if (s.pipeRank !== k % pipe) fail(`${path}.pipeRank`, `stage ${k} runs on pipeline rank ${k % pipe} (stage mod ${pipe} stages), not ${s.pipeRank}`);
    if (s.layers[0] !== nextLayer) fail(`${path}.layers[0]`, `stage ${k} must start at layer ${nextLayer}, right after the previous stage, not ${s.layers[0]}`);
    nextLayer = s.layers[1] + 1;
    const want = replicas(s.pipeRank);
    if (!same(s.ranks, want)) fail(`${path}.ranks`, `expected ${list(want)}, ${why(s.pipeRank)}, got ${list(s.ranks)}`);
    const shard = plan.shard[k]!;
    if (!same(shard.ranks, want)) fail(`shard[${k}].ranks`, `expected ${list(want)}, the ranks of stage ${k}, got ${list(shard.ranks)}`);
  });
  const layers = plan.graph.layers.length;
  if (nextLayer !== layers) fail(`stages[${plan.stages.length - 1}].layers[1]`, `the last stage must end at the model's last layer ${layers - 1}, not ${nextLayer - 1}`);
  plan.programs.forEach((prog, p) => {
    const path = `programs[${p}]`;
    if (prog.pipeRank !== p) fail(`${path}.pipeRank`, `program ${p} runs pipeline rank ${p}, not ${prog.pipeRank}`);
    const stages = plan.stages.filter((s) => s.pipeRank === p).map((s) => s.index);
    if (!same(prog.stages, stages)) fail(`${path}.stages`, `expected ${list(stages)}, the stages on pipeline rank ${p}, got ${list(prog.stages)}`);
    const want = replicas(p);
    if (!same(prog.ranks, want)) fail(`${path}.ranks`, `expected ${list(want)}, ${why(p)}, got ${list(prog.ranks)}`);
  });
}
