// `fsm cost FILE [--cluster NAME] [--devices N] [--calibration FILE] [--json] [--set KEY=VALUE]...`: per-layer
// FLOPs, activation memory and one-device time of a training step, plus model-state memory per device.
import { checkFile } from "../../check/check.js";
import { CalibrationError, loadCalibration, type Calibration } from "../../cost/calibration.js";
import { ClusterError, clusterFor, type Cluster } from "../../cost/cluster.js";
import { EstimateError, estimateModel, type ModelEstimate } from "../../cost/estimate.js";
import { SHARD_STRATEGIES } from "../../check/settings-types.js";
import { tableLines } from "../../format/table.js";
import { count, formatBytes, formatFlops, formatSeconds } from "../../format/units.js";
import { flag, integerFlag, parseArgs, UsageError } from "../args.js";
import type { CliIO } from "../io.js";
import { reportDiagnostics, reportNoModel } from "../report.js";
import type { Command } from "./command.js";


export const costCommand: Command = {
  name: "cost",
  summary: "estimate FLOPs, memory and time of a training step per layer",
  usage: `fsm cost FILE [--cluster NAME] [--devices N] [--calibration FILE] [--json] [--set KEY=VALUE]...

Checks FILE and prints, per layer, its parameters, forward and backward FLOPs for the
train section's global batch, activation memory per micro-batch (with and without
checkpointing) and estimated time on one device; then totals and model-state memory
per device under each shard strategy (none, oss, sddp, fsdp).
  --cluster NAME        device profile: cpu (default), a100-80g, h100-sxm, h200
  --devices N           total devices, for memory per device (default 1)
  --calibration FILE    measured op times that replace the profile's estimates
  --json                the estimate as JSON
  --set KEY=VALUE       override a train/parallel setting (repeatable)`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [
      { name: "cluster", value: true },
      { name: "devices", value: true },
      { name: "calibration", value: true },
      { name: "json" },
      { name: "set", value: true, repeat: true },
    ]);
    if (args.positionals.length !== 1) return -1;
    // Argument mistakes are found before the (possibly slow) model check, and are usage errors (exit 2).
    const cluster = clusterFromArgs(flag(args, "cluster") ?? "cpu", integerFlag(args, "devices") ?? 1, flag(args, "calibration"));
    const file = args.positionals[0]!;
    const result = checkFile(file, { overrides: args.flags.get("set") ?? [] });
    reportDiagnostics(io, result.diagnostics, result.sources);
    const model = result.model;
    if (!model) {
      reportNoModel(io, file, "cost", result.diagnostics);
      return 1;
    }
    let estimate: ModelEstimate;
    try {
      estimate = estimateModel(model, cluster);
    } catch (e) {
      if (!(e instanceof EstimateError)) throw e;
      io.stderr(`${file}: ${e.message}\n`);
      return 1;
    }
    io.stdout(args.flags.has("json") ? JSON.stringify(estimate, null, 2) + "\n" : formatEstimate(estimate));
    return 0;
  },
};

function clusterFromArgs(name: string, devices: number, calibrationPath: string | undefined): Cluster {
  try {
    const calibration: Calibration | undefined = calibrationPath === undefined ? undefined : loadCalibration(calibrationPath);
    return clusterFor(name, devices, calibration);
  } catch (e) {
    if (e instanceof ClusterError || e instanceof CalibrationError) throw new UsageError(e.message);
    throw e;
  }
}

// ---- text form ---------------------------------------------------------------------------------------------

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return tableLines(header, rows).join("\n") + "\n";
}

export function formatEstimate(e: ModelEstimate): string {
  const c = e.cluster;
  const devices = `${c.devices} device${c.devices === 1 ? "" : "s"}, ${c.nodes} node${c.nodes === 1 ? "" : "s"}`;
  const seq = e.seq === null ? "" : `, seq ${e.seq}`;
  const rows = e.layers.map((l) => [
    l.name,
    count(l.parameters),
    formatFlops(l.forwardFlops),
    formatFlops(l.backwardFlops.input + l.backwardFlops.weight),
    formatBytes(l.activationBytes),
    formatBytes(l.checkpointedActivationBytes),
    formatSeconds(l.seconds),
  ]);
  const totalActivations = e.layers.reduce((n, l) => n + l.activationBytes, 0);
  const totalInputs = e.layers.reduce((n, l) => n + l.checkpointedActivationBytes, 0);
  rows.push([
    "total",
    count(e.parameters),
    formatFlops(e.forwardFlopsPerStep),
    formatFlops(e.backwardFlopsPerStep.input + e.backwardFlopsPerStep.weight),
    formatBytes(totalActivations),
    formatBytes(totalInputs),
    formatSeconds(e.secondsOnOneDevice),
  ]);
  const split = e.modelStateBytesPerParamSplit;
  const perDevice = SHARD_STRATEGIES.map((s) => `${s} ${formatBytes(e.modelStateBytesPerDevice[s])}`).join(", ");
  const b = e.backwardFlopsPerStep;
  return [
    `model ${e.model} on ${c.name} (${devices}): batch ${e.batch}${seq}, ${e.precision}, ${e.optimizer}`,
    `FLOPs and times are for the global batch of ${e.batch}; activations for a micro-batch of ${e.microBatch} (the whole batch: chunks are not chosen yet)`,
    "",
    table(["layer", "parameters", "fwd FLOPs", "bwd FLOPs", "activations", "checkpointed", "time (1 device)"], rows),
    `FLOPs per step: ${formatFlops(e.flopsPerStep)} (forward ${formatFlops(e.forwardFlopsPerStep)}, backward ${formatFlops(b.input)} input + ${formatFlops(b.weight)} weight gradients)`,
    `activations per micro-batch: ${formatBytes(e.activationBytesPerMicroBatch.full)} without checkpointing, ${formatBytes(e.activationBytesPerMicroBatch.checkpointed)} with every layer checkpointed (inputs kept, one layer recomputed at a time)`,
    `model state: ${e.modelStateBytesPerParam} bytes/parameter (${split.param} weights + ${split.grad} gradients + ${split.optimizer} optimizer); per device over ${c.devices}: ${perDevice}`,
    `time on one ${c.name} device: ${formatSeconds(e.secondsOnOneDevice)} per step (forward + backward, roofline estimate${e.calibratedOps > 0 ? `; ${e.calibratedOps} ops calibrated` : ""})`,
    "",
  ].join("\n");
}
