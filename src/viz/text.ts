// `fsm viz --format text`: the plan at a glance in a terminal — summary, stage table, the graph by stage,
// the shard map, the predicted (and measured) timeline, memory per program, and the search's alternatives.
import { count, formatBytes, formatFlops, formatSeconds, pct, plural, rankText, ranksLabel, stageLayers, tableLines as table } from "./format.js";
import { memoryText, TEXT_LEGEND, timelineText, TP_LEGEND } from "./text-timeline.js";
import type { ShardGroup, ShardMember, TensorShard, ViewModel } from "./view-types.js";

/** Shard groups up to this size list every rank; larger ones one line of ranges. */
const LIST_MEMBERS = 8;
/** Tensor-parallel groups up to this size get a column per tensor rank; larger ones the first and last. */
const LIST_TENSOR_RANKS = 4;

function summaryLines(vm: ViewModel): string[] {
  const s = vm.summary;
  return [
    `${vm.title} (${plural(s.nodes, "node")}): ${count(s.parameters)} parameters`,
    vm.settings,
    `predicted step ${formatSeconds(s.stepSeconds)}, bubble ${pct(s.bubbleFraction)}, exposed communication ${formatSeconds(s.exposedCommSeconds)}, ` +
      `MFU ${pct(s.mfu)}, ${count(Math.round(s.tokensPerSecond))} tokens/s, ${formatFlops(s.flopsPerStep)} per step`,
    `peak memory ${formatBytes(s.peakMemoryBytes)} on rank ${s.peakRank} of ${formatBytes(s.capacityBytes)} per device (${pct(s.peakMemoryBytes / s.capacityBytes)})`,
  ];
}

function stageLines(vm: ViewModel): string[] {
  const rows = vm.stages.map((st) => [
    String(st.stage),
    stageLayers(st),
    rankText(st.ranks),
    count(st.parameters),
    formatFlops(st.flopsPerDevice),
    formatSeconds(st.computeSeconds),
    formatBytes(st.peakBytes),
    formatBytes(st.arenaBytes),
    st.runArenaBytes === undefined ? "-" : formatBytes(st.runArenaBytes),
    formatBytes(st.modelStateBytes),
  ]);
  const header = ["stage", "layers", "ranks", "parameters", "FLOPs/device", "compute", "live peak", "arena", "run arena", "model state"];
  return ["stages (per step; FLOPs and compute per device; memory per device of the stage: the memory plan's live peak and arena, and the arena fsm run allocates)", ...table(header, rows, 3).map((l) => `  ${l}`)];
}

function graphLines(vm: ViewModel): string[] {
  const lines = ["graph by stage (repeated blocks collapsed; [u: FSDP units])"];
  let stage = -1;
  const width = Math.max(...vm.layerGroups.map((g) => g.label.length));
  for (const g of vm.layerGroups) {
    if (g.stage !== stage) {
      stage = g.stage;
      const row = vm.stages[stage]!;
      lines.push(`  ${stage === vm.layerGroups[0]!.stage ? "" : "-> "}stage ${stage} (ranks ${rankText(row.ranks)})`);
    }
    const notes = [`${count(g.parameters)} params`];
    if (g.units.length > 0) notes.push(`[u ${rankText(g.units)}]`);
    if (g.tied.length > 0) notes.push(`tied ${g.tied.join(", ")}`);
    lines.push(`    ${g.label.padEnd(width)}  ${notes.join("  ")}`);
  }
  return lines;
}

function ownsText(m: ShardMember): string {
  if (m.owns.length === 0) return "";
  const head = m.owns.slice(0, 2).join(", ");
  return m.owns.length > 2 ? `  ${head}, +${m.owns.length - 2} more` : `  ${head}`;
}

function range(xs: readonly number[]): string {
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo === hi ? formatBytes(lo) : `${formatBytes(lo)}..${formatBytes(hi)}`;
}

/** `0-1, 2-3, 4-5`, or `0-7, 8-15, ..., 1016-1023` when there are more than LIST_MEMBERS. */
function groupsText(groups: readonly (readonly number[])[]): string {
  const shown = groups.length <= LIST_MEMBERS ? groups : [groups[0]!, groups[1]!, groups[groups.length - 1]!];
  const texts = shown.map((g) => rankText(g));
  if (shown !== groups) texts.splice(2, 0, "...");
  return texts.join(", ");
}

function tensorLines(stage: number, t: TensorShard): string[] {
  const ranks = Array.from({ length: t.degree }, (_, r) => r).filter((r) => t.degree <= LIST_TENSOR_RANKS || r === 0 || r === t.degree - 1);
  const rows = t.params.map((p) => [p.name, p.shape, p.split, ...ranks.map((r) => p.slices[r] ?? "")]);
  return [
    `  stage ${stage}, tensor parallel over ${plural(t.groups.length, "group")} of ${t.degree} ranks (${groupsText(t.groups)}): ${t.holds}`,
    ...table(["parameter", "whole", "split", ...ranks.map((r) => `tensor rank ${r}`)], rows, 3 + ranks.length).map((l) => `    ${l}`),
  ];
}

function shardLines(groups: readonly ShardGroup[]): string[] {
  const lines = ["shards (model state per rank: weights / gradients / optimizer state)"];
  for (const g of groups) {
    lines.push(`  stage ${g.stage}, shard ${g.strategy} over ${g.over}: ${g.holds}`);
    if (g.members.length <= LIST_MEMBERS) {
      // A member with a tensor-parallel group stands for its every rank: each holds these bytes of its slices.
      const labels = g.members.map((m) => `${ranksLabel(m.devices)}${m.devices.length > 1 ? " each" : ""}`);
      const w = Math.max(...labels.map((l) => l.length));
      g.members.forEach((m, i) => {
        lines.push(`    ${labels[i]!.padEnd(w)}  ${formatBytes(m.paramBytes)} / ${formatBytes(m.gradBytes)} / ${formatBytes(m.optimizerBytes)}${ownsText(m)}`);
      });
    } else {
      const ms = g.members;
      const owning = ms.map((m) => m.owns.length);
      const owns = Math.max(...owning) > 0 ? `; owns ${Math.min(...owning)}..${Math.max(...owning)} ${g.strategy === "fsdp" ? "slices" : "parameters"} each` : "";
      lines.push(`    ${ms.length} ranks: ${range(ms.map((m) => m.paramBytes))} / ${range(ms.map((m) => m.gradBytes))} / ${range(ms.map((m) => m.optimizerBytes))}${owns}`);
    }
    if (g.tensor) lines.push(...tensorLines(g.stage, g.tensor));
  }
  return lines;
}

function alternativeLines(vm: ViewModel): string[] {
  const a = vm.alternatives;
  if (!a) return ["alternatives: none (every parallel setting was given)"];
  const lines = [`alternatives the search considered (chosen: ${a.chosen})`, "  candidates (pipeline simulator):"];
  const width = Math.max(...a.candidates.map((c) => c.settings.length));
  for (const c of a.candidates) {
    const note = c.status === "rejected" ? `  rejected: ${c.reason ?? ""}` : c.status === "chosen" ? "  <- chosen" : "";
    lines.push(`    ${c.settings.padEnd(width)}  ${formatSeconds(c.stepSeconds).padStart(9)}  ${formatBytes(c.memoryBytes).padStart(9)}${note}`);
  }
  if (a.neighbors.length > 0) lines.push("  one setting changed (search estimate):");
  for (const n of a.neighbors) {
    const what = n.stepSeconds !== undefined ? `${formatSeconds(n.stepSeconds)}, ${formatBytes(n.memoryBytes ?? 0)}` : (n.reason ?? "");
    lines.push(`    ${n.setting}=${n.value}: ${what}`);
  }
  const lost = a.families.filter((f) => f.reason !== undefined);
  if (lost.length > 0) lines.push("  pipeline depth × data parallel, not chosen:");
  for (const f of lost) lines.push(`    ${f.family}: ${f.reason}`);
  return lines;
}

export function renderText(vm: ViewModel): string {
  const scale = Math.max(vm.predicted.stepSeconds, vm.measured?.stepSeconds ?? 0);
  const sections = [
    summaryLines(vm),
    stageLines(vm),
    graphLines(vm),
    shardLines(vm.shards),
    [`timeline (${TEXT_LEGEND}${vm.summary.tensorParallel > 1 ? `; ${TP_LEGEND}` : ""})`, ...timelineText(vm.predicted, scale), ...(vm.measured ? timelineText(vm.measured, scale) : [])],
    ["memory", ...memoryText(vm.memory, vm.predicted.stepSeconds)],
    alternativeLines(vm),
  ];
  return sections.map((s) => s.join("\n")).join("\n\n") + "\n";
}
