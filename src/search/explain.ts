// The search's account of a plan, from what the plan records (so `fsm explain plan.json` needs nothing else):
// a short block for `fsm compile` (counts, the choice, the runners-up, families that lost and why) and the
// full explanation (each setting against its other values, and the stage split).
import type { Plan, PlanSearch } from "../plan/plan.js";

function seconds(s: number): string {
  if (s >= 1) return `${s.toFixed(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toFixed(2)} ms`;
  return `${(s * 1e6).toFixed(1)} µs`;
}

function gib(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

function relative(x: number, base: number): string {
  const d = (x / base - 1) * 100;
  return `${d >= 0 ? "+" : ""}${d.toFixed(1)}%`;
}

/** The search's counts in one line. */
export function searchCounts(s: PlanSearch): string {
  const t = s.stats;
  return (
    `search: ${t.candidates} candidates, ${t.evaluated} evaluated (optimal stage split each), ${t.pruned} pruned by the step-time bound, ` +
    `${t.infeasible} did not fit, ${t.simulated} simulated, in ${t.seconds.toFixed(2)} s`
  );
}

/** What `fsm compile` prints after the plan's summary when the search chose its settings. */
export function searchBlock(s: PlanSearch): string[] {
  const chosen = s.candidates.find((c) => c.status === "chosen")!;
  const lines = [searchCounts(s), `chosen: ${s.chosen}`];
  const width = Math.max(...s.candidates.map((c) => c.settings.length));
  lines.push(`  ${"candidate".padEnd(width)}  ${"estimate".padStart(10)}  ${"simulated".padStart(10)}  ${"memory".padStart(9)}`);
  for (const c of s.candidates) {
    const sim = c.simulatedStepSeconds === null ? "-" : seconds(c.simulatedStepSeconds);
    const note = c.status === "chosen" ? "  <- chosen" : c.status === "rejected" ? `  rejected: ${c.reason}` : `  ${relative(c.simulatedStepSeconds ?? c.estimatedStepSeconds, chosen.simulatedStepSeconds ?? chosen.estimatedStepSeconds)}`;
    lines.push(`  ${c.settings.padEnd(width)}  ${seconds(c.estimatedStepSeconds).padStart(10)}  ${sim.padStart(10)}  ${gib(c.estimatedMemoryBytes).padStart(9)}${note}`);
  }
  if (s.overflowed) lines.push(`memory plans overflowed first (the search ran again for ${(s.memoryScale * 100).toFixed(0)}% of device memory): ${s.overflowed.join("; ")}`);
  const rejected = s.families.filter((f) => f.reason !== undefined);
  if (rejected.length > 0) {
    lines.push("rejected:");
    for (const f of rejected) lines.push(`  ${f.family}: ${f.reason}`);
  }
  return lines;
}

/** Why each choice was made: pipeline depth against the other families, each other setting against its
 *  other values with the rest unchanged, and the stage split. */
export function explainPlan(plan: Plan): string[] {
  const s = plan.search;
  const split = splitLines(plan);
  if (!s) {
    return [
      `${plan.model.name}: every parallel setting was given, so nothing was searched; the stage split is the optimal one for those settings`,
      ...split,
    ];
  }
  const chosen = s.candidates.find((c) => c.status === "chosen")!;
  const base = chosen.estimatedStepSeconds;
  const lines = [`${plan.model.name} on ${plan.cluster.devices} × ${plan.cluster.profile}: ${s.chosen}`, searchCounts(s)];
  if (s.overflowed) {
    lines.push(`memory: the search planned for ${(s.memoryScale * 100).toFixed(0)}% of each device after these choices' memory plans overflowed: ${s.overflowed.join("; ")}`);
  }
  lines.push("");
  lines.push(`pipeline depth × data parallel (best estimate per family; the chosen family's best is ${seconds(base)}):`);
  for (const f of s.families) lines.push(`  ${f.family}: ${f.bestStepSeconds !== undefined ? `${seconds(f.bestStepSeconds)} (${relative(f.bestStepSeconds, base)})` : f.reason}`);
  const settings = [...new Set(s.neighbors.map((n) => n.setting))];
  for (const setting of settings) {
    lines.push(`${setting} (the rest as chosen; estimate ${seconds(base)} as chosen):`);
    for (const n of s.neighbors.filter((x) => x.setting === setting)) {
      lines.push(`  ${n.value}: ${n.stepSeconds !== undefined ? `${seconds(n.stepSeconds)} (${relative(n.stepSeconds, base)}), memory ${gib(n.memoryBytes ?? 0)}` : n.reason}`);
    }
  }
  if (chosen.recomputeLayers.length > 0) {
    lines.push(`selective checkpointing recomputes ${chosen.recomputeLayers.length} layers (${chosen.recomputeLayers.map((l) => plan.graph.layers[l]!.name).join(", ")}): only what device memory requires`);
  }
  const others = s.candidates.filter((c) => c.status !== "chosen");
  if (others.length > 0) {
    lines.push("runners-up (pipeline simulator):");
    for (const c of others) {
      const t = c.simulatedStepSeconds ?? c.estimatedStepSeconds;
      lines.push(`  ${c.settings}: ${seconds(t)} (${relative(t, chosen.simulatedStepSeconds ?? base)})${c.status === "rejected" ? `, rejected: ${c.reason}` : ""}`);
    }
  }
  lines.push(`the compiled plan's own simulation: ${seconds(s.plannedStepSeconds)} per step (search estimate ${seconds(base)}, pipeline simulator ${chosen.simulatedStepSeconds === null ? "-" : seconds(chosen.simulatedStepSeconds)})`);
  return [...lines, ...split];
}

/** The stage split: layers per stage and what each stage costs per micro-batch. */
function splitLines(plan: Plan): string[] {
  const chosen = plan.search?.candidates.find((c) => c.status === "chosen");
  const sizes = plan.stages.map((st) => st.layers[1] - st.layers[0] + 1);
  const lines = [`stage split (layers per stage): [${sizes.join(", ")}] — contiguous, minimizing the slowest stage under each device's memory`];
  if (chosen && chosen.stageSeconds.length > 0) {
    const max = Math.max(...chosen.stageSeconds);
    const slowest = chosen.stageSeconds.indexOf(max);
    lines.push(`  per micro-batch: ${chosen.stageSeconds.map((t) => seconds(t)).join(", ")}; bottleneck rank ${slowest} (${seconds(max)})`);
  }
  for (const st of plan.stages) {
    lines.push(`  stage ${st.index}: ${plan.graph.layers[st.layers[0]]!.name} .. ${plan.graph.layers[st.layers[1]]!.name} on pipeline rank ${st.pipeRank}`);
  }
  return lines;
}
