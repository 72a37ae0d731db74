// `fsm compile FILE [--cluster NAME] [--devices N] [-o PLAN] [--json] [--set KEY=VALUE]...`: checks the model,
// compiles it into a partitioned, simulated plan, writes the plan and prints its summary.
import { checkFile } from "../../check/check.js";
import { CompileError } from "../../compile/errors.js";
import { compileModel } from "../../compile/compile.js";
import { ARENA_BUDGET_SLOTS, ARENA_MODES, type ArenaMode } from "../../compile/runtime-arenas.js";
import { CalibrationError, checkCalibrationProfile, loadCalibration, type Calibration } from "../../cost/calibration.js";
import { ClusterError, getProfile } from "../../cost/cluster.js";
import { writePlan } from "../../plan/serialize.js";
import type { Plan } from "../../plan/plan.js";
import { explainPlan, searchBlock } from "../../search/explain.js";
import { summarizePlan, type PlanSummary } from "../../plan/summary.js";
import { checkWritableFile } from "../../files/path-kind.js";
import { flag, integerFlag, parseArgs, UsageError } from "../args.js";
import type { CliIO } from "../io.js";
import { version } from "../main.js";
import { reportDiagnostics, reportNoModel } from "../report.js";
import type { Command } from "./command.js";
import { formatBytes, formatSeconds, plural } from "../../format/units.js";

export const compileCommand: Command = {
  name: "compile",
  summary: "compile a model into a partitioned, simulated training plan",
  usage: `fsm compile FILE [--cluster NAME] [--devices N] [-o PLAN] [--json] [--explain] [--set KEY=VALUE]... [--arenas MODE]

Checks FILE, then plans one training step on the cluster: layers split into pipeline
stages, each stage's parameters sharded over its data-parallel replicas, the schedule
lowered to per-device actions with collectives and a static memory plan, all simulated.
Writes the plan (versioned JSON) and prints stages, devices, shard groups, micro-batches,
schedule, predicted step time, bubble, exposed communication, memory per device,
throughput and MFU. Parallel settings left 'auto' (or absent) are chosen by the plan
search: pipeline depth × data parallelism × shard strategy × micro-batches × schedule ×
checkpointing, each candidate with its optimal stage split under device memory, ranked
by predicted step time; the best few are simulated and the fastest that fits is
planned. The choice, the runners-up and rejected families are printed and kept in the
plan ('fsm explain PLAN'). The stage split is always optimal unless a balance is given.
devices = stages × data_parallel (any one from the other two); the search needs devices.
  --cluster NAME        device profile: cpu (default), a100-80g, h100-sxm, h200
  --devices N           total devices (default: stages × data_parallel)
  --calibration FILE    measured op times that replace the profile's estimates
  -o, --output PLAN     where to write the plan (default: <model>.plan.json here)
  --json                print the summary as JSON (with the search's record under "search")
  --explain             also explain each choice (as 'fsm explain' does)
  --set KEY=VALUE       override a train/parallel setting (repeatable), e.g. --set parallel.stages=4
  --arenas MODE         lay out the arenas fsm run allocates, the memory the plan predicts:
                        auto (default: plans of up to ${ARENA_BUDGET_SLOTS / 1000}k slots, 1-2 s), always, never`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [
      { name: "cluster", value: true },
      { name: "devices", value: true },
      { name: "calibration", value: true },
      { name: "output", short: "o", value: true },
      { name: "json" },
      { name: "explain" },
      { name: "set", value: true, repeat: true },
      { name: "arenas", value: true },
    ]);
    if (args.positionals.length !== 1) return -1;
    // Argument mistakes are usage errors (exit 2), found before the model is checked.
    const cluster = flag(args, "cluster") ?? "cpu";
    const devices = integerFlag(args, "devices");
    const arenas = flag(args, "arenas") ?? "auto";
    if (!(ARENA_MODES as readonly string[]).includes(arenas)) throw new UsageError(`--arenas takes ${ARENA_MODES.join(", ")}, got '${arenas}'`);
    let calibration: Calibration | undefined;
    try {
      const profile = getProfile(cluster);
      const path = flag(args, "calibration");
      calibration = path === undefined ? undefined : loadCalibration(path);
      // Checked with the other arguments, not found inside the plan search.
      if (calibration) checkCalibrationProfile(calibration, profile.name);
    } catch (e) {
      if (e instanceof ClusterError || e instanceof CalibrationError) throw new UsageError(e.message);
      throw e;
    }
    const file = args.positionals[0]!;
    const result = checkFile(file, { overrides: args.flags.get("set") ?? [] });
    reportDiagnostics(io, result.diagnostics, result.sources);
    const model = result.model;
    if (!model) {
      reportNoModel(io, file, "compile", result.diagnostics);
      return 1;
    }
    const out = flag(args, "output") ?? `${model.name}.plan.json`;
    // Before the search, which can take a while: the plan must have somewhere to go.
    checkWritableFile(out, "-o");
    let summary: PlanSummary;
    let written: { path: string; bytes: number };
    let plan: Plan;
    let skipped: string | undefined;
    let note: string | undefined;
    try {
      const compiled = compileModel(model, {
        cluster,
        source: file,
        fsmVersion: version(),
        ...(devices !== undefined && { devices }),
        ...(calibration && { calibration }),
        arenas: arenas as ArenaMode,
      });
      written = { path: out, bytes: writePlan(out, compiled.plan) };
      summary = summarizePlan(compiled.plan);
      plan = compiled.plan;
      skipped = compiled.arenasSkipped;
      note = compiled.arenasNote;
    } catch (e) {
      if (e instanceof CompileError) {
        io.stderr(`${file}: error: ${e.message}\n`);
        return 1;
      }
      if (e instanceof Error && "code" in e && typeof (e as NodeJS.ErrnoException).code === "string" && "path" in e) {
        io.stderr(`${file}: error: cannot write the plan: ${(e as NodeJS.ErrnoException).code} ${(e as NodeJS.ErrnoException).path}\n`);
        return 1;
      }
      throw e;
    }
    if (args.flags.has("json")) {
      io.stdout(JSON.stringify({ ...summary, ...(skipped !== undefined && { arenasSkipped: skipped }), ...(plan.search && { search: plan.search }), plan: written }, null, 2) + "\n");
      return 0;
    }
    let text = formatSummary(summary, written, skipped);
    if (note !== undefined) text += `note: ${note}\n`;
    if (plan.search) text += searchBlock(plan.search).join("\n") + "\n";
    if (args.flags.has("explain")) text += "\n" + explainPlan(plan).join("\n") + "\n";
    io.stdout(text);
    return 0;
  },
};

const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
const range = (bytes: readonly number[]): string => {
  const lo = formatBytes(Math.min(...bytes));
  const hi = formatBytes(Math.max(...bytes));
  return lo === hi ? lo : `${lo} to ${hi}`;
};

function rankRange(ranks: readonly number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`;
  const contiguous = ranks.every((r, i) => i === 0 || r === ranks[i - 1]! + 1);
  return contiguous ? `ranks ${ranks[0]}-${ranks[ranks.length - 1]}` : `ranks ${ranks.join(",")}`;
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === 0 || i === 1 || i === 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd();
  return [line(header), ...rows.map(line)];
}

export function formatSummary(s: PlanSummary, written: { path: string; bytes: number }, arenasSkipped?: string): string {
  const p = s.predicted;
  const virtual = s.virtualStages > 1 ? ` × ${s.virtualStages} virtual` : "";
  const rows = s.stageLayers.map((st) => [
    String(st.stage),
    `${st.firstLayer}${st.layers[1] > st.layers[0] ? ` .. ${st.lastLayer}` : ""} (${st.layers[0]}-${st.layers[1]})`,
    rankRange(st.ranks),
    formatBytes(st.modelStateBytes),
    formatBytes(st.peakMemoryBytes),
  ]);
  const tokens = Math.round(p.tokensPerSecond).toLocaleString("en-US");
  const partitions = s.stageLayers.filter((st) => st.partition);
  const partitionLine = partitions.length
    ? [
        `${s.shard} partition (largest shard per stage; FairScale's greedy in brackets): ${partitions
          .map((st) => `${formatBytes(st.partition!.largestShardBytes)} [${formatBytes(st.partition!.greedyLargestShardBytes)}]`)
          .join(", ")}`,
      ]
    : [];
  return [
    `model ${s.model} on ${s.cluster}: ${s.devices} device${s.devices === 1 ? "" : "s"} (${s.nodes} node${s.nodes === 1 ? "" : "s"}) = ${s.stages} pipeline stage${s.stages === 1 ? "" : "s"}${virtual} × ${s.dataParallel} data-parallel${s.tensorParallel > 1 ? ` × ${s.tensorParallel} tensor-parallel${s.sequenceParallel ? " (sequence-parallel)" : ""}` : ""}`,
    `schedule ${s.schedule}, ${s.microbatches} micro-batch${s.microbatches === 1 ? "" : "es"} of ${s.microBatchSize} per replica (batch ${s.batch}), checkpoint ${s.checkpoint}`,
    `shard ${s.shard}${s.fsdp}: each stage over its ${s.dataParallel} replica${s.dataParallel === 1 ? "" : "s"} (group = the stage's ranks)`,
    "",
    ...table(["stage", "layers", "devices", "model state", "peak memory"], rows),
    ...partitionLine,
    "",
    `predicted step ${formatSeconds(p.stepTimeSeconds)}, bubble ${pct(p.bubbleFraction)}, exposed communication ${formatSeconds(p.exposedCommSeconds)}`,
    `throughput ${tokens} tokens/s, MFU ${pct(p.mfu)}; peak memory per device ${range(p.peakMemoryBytes)}`,
    s.memoryFrom === "runtime arenas"
      ? `memory: the arenas fsm run allocates (laid out by its lowering)${s.reservedBytes > 0 ? `, with ${formatBytes(s.reservedBytes)} a GPU reserves besides (kernel scratch, cuBLAS workspace)` : ""}; the memory plan holds ${range(s.memoryPlanPeakBytes)} at its peaks`
      : `memory: the memory plan's arenas; fsm run's own were not laid out${arenasSkipped === undefined ? "" : ` (${arenasSkipped})`}`,
    `wrote ${written.path} (${formatBytes(written.bytes)}, ${s.programs} program${s.programs === 1 ? "" : "s"} shared by ${plural(s.devices, "device")})`,
    "",
  ].join("\n");
}
