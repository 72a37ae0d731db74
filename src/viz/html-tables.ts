// The HTML page's tables: summary numbers, stages, layer groups (repeated blocks collapsible), the shard map
// and the search's alternatives. Every value escaped; one row per stage carries data-stage.
import { count, esc, formatBytes, formatFlops, formatSeconds, pct, plural, rankText, stageColor, stageLayers } from "./format.js";
import type { ShardGroup, TensorShard, ViewModel } from "./view-types.js";

const row = (cells: readonly string[], attrs = "") => `<tr${attrs}>${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`;
const head = (cells: readonly string[]) => `<tr>${cells.map((c) => `<th>${esc(c)}</th>`).join("")}</tr>`;
const swatch = (stage: number) => `<span class="sw" style="background:${stageColor(stage)}"></span>`;

export function summaryHtml(vm: ViewModel): string {
  const s = vm.summary;
  const items: [string, string][] = [
    ["predicted step", formatSeconds(s.stepSeconds)],
    ["bubble", pct(s.bubbleFraction)],
    ["exposed communication", formatSeconds(s.exposedCommSeconds)],
    ["peak memory", `${formatBytes(s.peakMemoryBytes)} (rank ${s.peakRank}; ${pct(s.peakMemoryBytes / s.capacityBytes)} of ${formatBytes(s.capacityBytes)})`],
    ["MFU", pct(s.mfu)],
    ["throughput", `${count(Math.round(s.tokensPerSecond))} tokens/s`],
    ["FLOPs per step", formatFlops(s.flopsPerStep)],
    ["parameters", count(s.parameters)],
  ];
  if (vm.measured) items.push(["measured step", `${formatSeconds(vm.measured.stepSeconds)} (${(vm.measured.stepSeconds / s.stepSeconds).toFixed(2)}× predicted)`]);
  return `<dl class="cards">${items.map(([k, v]) => `<div><dt>${esc(k)}</dt><dd>${esc(v)}</dd></div>`).join("")}</dl>`;
}

export function stageTableHtml(vm: ViewModel): string {
  const rows = vm.stages.map((st) =>
    row(
      [
        `${swatch(st.stage)}${st.stage}`,
        esc(stageLayers(st)),
        esc(rankText(st.ranks)),
        count(st.parameters),
        esc(formatFlops(st.flopsPerDevice)),
        esc(formatSeconds(st.computeSeconds)),
        esc(formatBytes(st.peakBytes)),
        esc(formatBytes(st.arenaBytes)),
        st.runArenaBytes === undefined ? "-" : esc(formatBytes(st.runArenaBytes)),
        esc(formatBytes(st.modelStateBytes)),
      ],
      ` data-stage="${st.stage}"`,
    ),
  );
  const header = head(["stage", "layers", "ranks", "parameters", "FLOPs / device", "compute", "live peak", "arena", "run arena", "model state"]);
  return `<table class="num">${header}${rows.join("")}</table>`;
}

export function layerTableHtml(vm: ViewModel): string {
  const rows = vm.layerGroups.map((g, i) => {
    const name = g.names.length > 1 ? `<details><summary>${esc(g.label)}</summary>${esc(g.names.join(", "))}</details>` : esc(g.label);
    const units = g.units.length > 0 ? esc(rankText(g.units)) : "";
    return row([`${swatch(g.stage)}${g.stage}`, name, count(g.parameters), esc(formatFlops(g.flops)), units, esc(g.tied.join(", "))], ` data-group="${i}"`);
  });
  return `<table class="num">${head(["stage", "layers", "parameters", "FLOPs / micro-batch", "FSDP units", "tied weights"])}${rows.join("")}</table>`;
}

function tensorHtml(stage: number, t: TensorShard): string {
  const rows = t.params.map((p) => row([esc(p.name), esc(p.shape), esc(p.split), ...Array.from({ length: t.degree }, (_, r) => esc(p.slices[r] ?? ""))]));
  const header = head(["parameter", "whole", "split", ...Array.from({ length: t.degree }, (_, r) => `tensor rank ${r}`)]);
  const groups = t.groups.map((g) => rankText(g)).join(", ");
  const summary = `${swatch(stage)}stage ${stage}: tensor parallel over ${plural(t.groups.length, "group")} of ${t.degree} ranks (${esc(groups)}) — ${esc(t.holds)}`;
  return `<details class="shard tensor" data-tensor-stage="${stage}"${t.groups.length <= 8 ? " open" : ""}><summary>${summary}</summary><table>${header}${rows.join("")}</table></details>`;
}

function shardGroupHtml(g: ShardGroup): string {
  // A member with a tensor-parallel group stands for its every rank: each holds these bytes of its slices.
  const rows = g.members.map((m) =>
    row([esc(rankText(m.devices)), String(m.groupRank), esc(formatBytes(m.paramBytes)), esc(formatBytes(m.gradBytes)), esc(formatBytes(m.optimizerBytes)), esc(m.owns.join(", "))]),
  );
  const table = `<table class="num">${head([g.tensor ? "ranks (each)" : "rank", "group rank", "weights", "gradients", "optimizer state", "owns"])}${rows.join("")}</table>`;
  // Small groups open; a thousand-rank map stays folded until asked for.
  const open = g.members.length <= 8 ? " open" : "";
  const shard = `<details class="shard"${open}><summary>${swatch(g.stage)}stage ${g.stage}: shard ${esc(g.strategy)} over ${esc(g.over)} — ${esc(g.holds)}</summary>${table}</details>`;
  return g.tensor ? shard + tensorHtml(g.stage, g.tensor) : shard;
}

export function shardMapHtml(vm: ViewModel): string {
  return vm.shards.map(shardGroupHtml).join("");
}

export function alternativesHtml(vm: ViewModel): string {
  const a = vm.alternatives;
  if (!a) return "<p>Every parallel setting was given, so nothing was searched.</p>";
  const cands = a.candidates.map((c) =>
    row([esc(c.settings), esc(c.status), esc(formatSeconds(c.stepSeconds)), esc(formatBytes(c.memoryBytes)), esc(c.reason ?? "")], c.status === "chosen" ? ' class="chosen"' : ""),
  );
  const neighbors = a.neighbors.map((n) =>
    row([esc(`${n.setting}=${n.value}`), n.stepSeconds !== undefined ? esc(formatSeconds(n.stepSeconds)) : "", n.memoryBytes !== undefined ? esc(formatBytes(n.memoryBytes)) : "", esc(n.reason ?? "")]),
  );
  const families = a.families.map((f) => row([esc(f.family), f.bestStepSeconds !== undefined ? esc(formatSeconds(f.bestStepSeconds)) : "", esc(f.reason ?? "")]));
  return (
    `<p>chosen: <code>${esc(a.chosen)}</code></p>` +
    // Two kinds of step time: the finalists' are the pipeline simulator's, the others the search's estimates
    // (its step model), which run lower; each table says which it shows, so they are not compared as one.
    `<h3>Candidates ranked by the pipeline simulator</h3><table>${head(["settings", "status", "step (simulated)", "memory", "why rejected"])}${cands.join("")}</table>` +
    `<h3>One setting changed (the search's estimates, not simulated)</h3><table>${head(["setting", "step (estimate)", "memory (estimate)", "why not"])}${neighbors.join("")}</table>` +
    `<h3>Pipeline depth × data parallel (the search's estimates)</h3><table>${head(["family", "best step (estimate)", "why not"])}${families.join("")}</table>`
  );
}
