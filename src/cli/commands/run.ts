// `fsm run PLAN [--steps N] [--json]` and `fsm run FILE.fsm [--devices N] [--set ...]`: trains as planned and
// reports each step. A .fsm file is compiled for the local CPU first (the one-command start).
import { checkFile } from "../../check/check.js";
import { unverifiedText } from "../../checkpoint/checksum.js";
import { CompileError } from "../../compile/errors.js";
import { compileModel } from "../../compile/compile.js";
import { loadPlan } from "../../verify/load.js";
import { PlanError } from "../../plan/plan-error.js";
import type { Plan } from "../../plan/plan.js";
import { writeAtomically } from "../../plan/serialize.js";
import { ENGINES, FAULT_KINDS, type InjectedFault } from "../../runtime/engines.js";
import { chooseDevice, DEVICE_KINDS, DeviceChoiceError, type DeviceChoice, type DeviceKind } from "../../runtime/device-choice.js";
import { checkProcessCount, RunError, runPlan, type Engine, type StepReport } from "../../runtime/run-loop.js";
import { launchedProcesses, processWorld, WorldError, type ProcessWorld } from "../../runtime/world.js";
import { checkReadableDir, checkReadableFile, checkWritableDir, checkWritableFile } from "../../files/path-kind.js";
import { resolveMesh } from "../../compile/resolve.js";
import { flag, integerFlag, parseArgs, UsageError } from "../args.js";
import type { CliIO } from "../io.js";
import { version } from "../main.js";
import { reportDiagnostics } from "../report.js";
import type { Command } from "./command.js";
import { formatBytes, formatSeconds, plural } from "../../format/units.js";
import { formatProfile, ProfileRecorder, type RunProfile } from "../../runtime/profile.js";
import { measurePeaks, type Peaks } from "../../runtime/profile-peaks.js";

const ENGINE_TEXT: Readonly<Record<Engine, string>> = {
  native: "native (each virtual device its own arena and a compute and a communication stream, on threads of their own or taking turns on as many as the cores; C++ kernels, OpenBLAS when built with it; collectives through the in-process communicator)",
  "native-kernels": "native-kernels (C++ kernels, OpenBLAS when built with it, driven action by action on one thread)",
  reference: "reference (TypeScript kernels, in-process, exact; slow)",
};

/** The header line's count of plan devices of a kind. */
function devicesText(kind: DeviceKind, n: number): string {
  const s = n === 1 ? "" : "s";
  if (kind === "cuda") return `${n} CUDA device${s}`;
  if (kind === "simt") return `${n} simt device${s} (the CUDA device's code emulated on the CPU)`;
  return `${n} cpu virtual device${s}`;
}

/** How the native engine runs on a GPU kind (the engine line). */
const GPU_ENGINE_TEXT = "native (each device an arena in GPU memory, a compute and a communication stream ordered by events; CUDA kernels, cuBLAS)";

function bar(fraction: number, width = 24): string {
  const full = Math.round(fraction * width);
  return `[${"#".repeat(full)}${".".repeat(width - full)}]`;
}

/** --inject-fault KIND@DEVICE[:STEP]; the device is checked against the plan once it is loaded. */
function parseFault(text: string): InjectedFault {
  const m = /^([a-z]+)@(0|[1-9]\d*)(?::([1-9]\d*))?$/.exec(text);
  if (!m) throw new UsageError(`--inject-fault must be KIND@DEVICE[:STEP] with KIND one of ${FAULT_KINDS.join(", ")} (e.g. kernel@1:3), got '${text}'`);
  const [device, step] = [Number(m[2]), Number(m[3] ?? 1)];
  if (!Number.isSafeInteger(device) || !Number.isSafeInteger(step)) throw new UsageError(`--inject-fault: the device and step must be integers of at most ${Number.MAX_SAFE_INTEGER}, got '${text}'`);
  const kind = m[1] as InjectedFault["kind"];
  if (!FAULT_KINDS.includes(kind)) throw new UsageError(`--inject-fault: unknown fault kind '${m[1]}' in '${text}' (expected ${FAULT_KINDS.join(", ")})`);
  if (kind === "oom" && m[3] !== undefined) throw new UsageError(`--inject-fault: oom strikes when the devices' arenas are allocated, before any step; give no step ('oom@${m[2]}')`);
  return { kind, device, step };
}

export const runCommand: Command = {
  name: "run",
  summary: "train a model as planned and report each step",
  usage: `fsm run PLAN|FILE.fsm [--steps N] [--json] [--device cpu|cuda|simt] [--devices N] [--set KEY=VALUE]... [--save DIR [--save-every N]] [--resume DIR] [--init FILE] [--timeout SECONDS] [--inject-fault KIND@DEVICE[:STEP]] [--profile]

Runs the plan's training steps on its devices: every stage, micro-batch and
data-parallel replica as planned, parameters from the train section's seed, its
synthetic data. Given a .fsm file, compiles it for the local CPU first (--devices,
default 1, and --set as for 'fsm compile'). Prints one line per step (loss, time,
tokens/s, ETA) and a summary; --json prints one JSON object per step and a summary.
Engines: native (default when the addon has every kernel) runs each virtual device with
its own arena and a compute and a communication stream (on threads of their own, or taking turns
on as many threads as the cores where those would outnumber them), sharding and communicating
as planned; native-kernels and reference run the plan's actions from TypeScript with the addon's or
the interpreter's kernels. All compute the 1-device plan's step up to float rounding.
A device whose arena exceeds the plan's device memory is refused before training. A
failure on any device stops every device with one error naming the step, the device
and its action; nothing of the failed step is checkpointed; the exit code is 1.
  --device KIND  cpu (CPU virtual devices), cuda (GPUs: several plan devices may share
                 one) or simt (the CUDA device's code emulated on the CPU, for tests);
                 default cuda when the plan is for a GPU profile and a GPU is present,
                 else cpu (with a note). --device cuda without a GPU is an error
  --steps N      steps to run (default: the train section's steps); after --resume,
                 N more, numbered on from the checkpoint's step
  --engine E     native, native-kernels or reference (default: native)
  --trace FILE   write a Chrome trace (Perfetto) of every step: per device a compute
                 and a communication track, so overlap is visible (native engine)
  --profile      after the run, where each step's time goes per kernel: calls, ms per
                 step and share of the step, per stream (compute, communication),
                 achieved GFLOP/s and GB/s against this machine's sgemm and memory
                 peaks (measured at startup). Steps after the first (the warm-up),
                 the mean over devices; with --json, the summary's 'profile'. Native
                 engine only; on GPUs the peaks are the run's GPUs' and kernels are
                 timed by the device's events
  --save DIR     write a checkpoint into DIR at the end (and on Ctrl-C): per-device
                 safetensors files, then DIR/latest.json (native engine)
  --save-every N also every N steps
  --resume DIR   continue from DIR's latest checkpoint: weights, optimizer state, loss
                 scale and data position; bit-identically in the same plan, and
                 into another plan of the model (devices, stages, sharding,
                 precision) by resharding every value (same seed and batch)
  --init FILE    start from the weights in FILE (safetensors, whole tensors named by
                 parameter path, e.g. from 'fsm consolidate') instead of the seed's
  --inject-fault KIND@DEVICE[:STEP]
                 a testing aid: DEVICE fails on purpose at STEP (default 1), to check
                 that every device stops with one clear error. KIND: kernel (a compute
                 kernel fails), comm (a collective or send/recv fails), nan (its forward
                 turns NaN: the prediction its loss reads, or on an earlier pipeline
                 stage the activation it sends on), oom (its memory set below its
                 arena, so it is refused at startup; no STEP) or hang (it stops
                 responding: its peers' --timeout names it). Native engine only
  --timeout SECONDS
                 how long a device waits for its peers in a collective or a receive
                 before the step fails naming the devices that never came (native
                 engine; default 60)
  --json         JSON lines instead of text
Under mpirun (mpirun -np P fsm run PLAN): P processes share the plan's devices in
contiguous blocks (P must divide them; process p runs devices p·N/P .. (p+1)·N/P-1),
in-process communication inside a process and MPI between processes, with the same
results as one process. Process 0 prints; a failure is reported once, by the
process where it happened. SIGTERM, like Ctrl-C, stops after the current step
(every process at the same one), saves with --save, and exits 143.
  --devices N    devices for a .fsm file (default 1)
  --set KEY=VAL  override a train/parallel setting of a .fsm file (repeatable)`,
  async run(argv: readonly string[], io: CliIO): Promise<number> {
    const args = parseArgs(argv, [
      { name: "steps", value: true },
      { name: "engine", value: true },
      { name: "trace", value: true },
      { name: "json" },
      { name: "devices", value: true },
      { name: "set", value: true, repeat: true },
      { name: "save", value: true },
      { name: "save-every", value: true },
      { name: "resume", value: true },
      { name: "init", value: true },
      { name: "inject-fault", value: true },
      { name: "timeout", value: true },
      { name: "device", value: true },
      { name: "profile" },
    ]);
    if (args.positionals.length !== 1) return -1;
    const steps = integerFlag(args, "steps");
    const devices = integerFlag(args, "devices");
    const saveEvery = integerFlag(args, "save-every");
    const saveDir = flag(args, "save");
    if (saveEvery !== undefined && saveDir === undefined) throw new UsageError("--save-every needs --save DIR");
    const resumeDir = flag(args, "resume");
    const engineText = flag(args, "engine");
    if (engineText !== undefined && !(ENGINES as readonly string[]).includes(engineText)) {
      throw new UsageError(`--engine must be one of ${ENGINES.join(", ")}, got '${engineText}'`);
    }
    const timeoutText = flag(args, "timeout");
    if (timeoutText !== undefined && !(/^\d+(\.\d+)?$/.test(timeoutText) && Number(timeoutText) > 0 && Number(timeoutText) <= 1e6)) {
      throw new UsageError(`--timeout must be a number of seconds in (0, 1000000], got '${timeoutText}'`);
    }
    const deviceText = flag(args, "device");
    if (deviceText !== undefined && !(DEVICE_KINDS as readonly string[]).includes(deviceText)) {
      throw new UsageError(`--device must be one of ${DEVICE_KINDS.join(", ")}, got '${deviceText}'`);
    }
    if (deviceText !== undefined && deviceText !== "cpu" && engineText !== undefined && engineText !== "native") {
      throw new UsageError(`--device ${deviceText} runs the native engine only, not --engine ${engineText}`);
    }
    const profile = args.flags.has("profile");
    if (profile && engineText !== undefined && engineText !== "native") throw new UsageError(`--profile times the native engine's instructions, not --engine ${engineText}`);
    const faultText = flag(args, "inject-fault");
    const fault = faultText === undefined ? undefined : parseFault(faultText);
    if (fault && engineText !== undefined && engineText !== "native") throw new UsageError(`--inject-fault works with the native engine only, not --engine ${engineText}`);
    const file = args.positionals[0]!;
    const json = args.flags.has("json");
    const tracePath = flag(args, "trace");
    const initPath = flag(args, "init");
    // Every path the run reads or writes, checked for its kind before any compiling or training: a trace or
    // checkpoint that cannot be written is found now, not after the last step (and /proc is never mkdir'd).
    if (tracePath !== undefined) checkWritableFile(tracePath, "--trace");
    if (saveDir !== undefined) checkWritableDir(saveDir, "--save");
    if (resumeDir !== undefined) checkReadableDir(resumeDir, "--resume");
    if (initPath !== undefined) checkReadableFile(initPath, "--init");
    // Under mpirun every process runs this command: process 0 alone speaks, except about a failure of its own.
    const launched = launchedProcesses();
    const lead = (launched?.rank ?? 0) === 0;
    const user = io;
    io = lead ? io : { stdout: () => {}, stderr: () => {}, isTTY: false };
    let world: ProcessWorld | undefined;
    let plan: Plan;
    try {
      try {
        world = processWorld();
      } catch (e) {
        if (e instanceof WorldError) throw new RunError(e.message);
        throw e;
      }
      if (file.endsWith(".fsm")) {
        const result = checkFile(file, { overrides: args.flags.get("set") ?? [] });
        reportDiagnostics(io, result.diagnostics, result.sources);
        if (!result.model) return 1;
        // --devices defaults to 1 only where the file (with --set) leaves the device count open.
        const fileDevices = resolveMesh(result.model.parallel, undefined).devices;
        plan = compileModel(result.model, { cluster: "cpu", devices: devices ?? fileDevices ?? 1, source: file, fsmVersion: version() }).plan;
      } else {
        if (args.flags.has("set") || devices !== undefined) throw new UsageError("--set and --devices apply to a .fsm file; a plan is run as compiled");
        plan = loadPlan(file);
      }
      const total = steps ?? plan.run?.steps ?? 1;
      if (fault && fault.device >= plan.cluster.devices) {
        throw new UsageError(`--inject-fault ${faultText}: the plan has no device ${fault.device} (it has devices 0..${plan.cluster.devices - 1})`);
      }
      if (fault && fault.step > total) throw new UsageError(`--inject-fault ${faultText}: the run has only ${total} step${total === 1 ? "" : "s"}`);
      const s = plan.settings;
      // Refused before the header line, on every process alike.
      checkProcessCount(world, plan);
      let device: DeviceChoice;
      try {
        device = chooseDevice(plan, deviceText as DeviceKind | undefined);
      } catch (e) {
        if (e instanceof DeviceChoiceError) throw new RunError(e.message);
        throw e;
      }
      // The profile's peaks, measured before the run on as many devices at once as this process runs; process 0
      // profiles its own devices (the others train as usual).
      const ranks = world.localRanks(plan.cluster.devices);
      let peaks: Peaks | undefined;
      let recorder: ProfileRecorder | undefined;
      if (profile && lead) {
        peaks = await measurePeaks(ranks.length, device.kind, world.size);
        recorder = new ProfileRecorder(ranks);
      }
      if (!json) {
        const over = world.size > 1 ? ` over ${world.size} processes (mpirun)` : "";
        if (device.note) io.stdout(`note: ${device.note}\n`);
        io.stdout(`run ${plan.model.name}: ${devicesText(device.kind, plan.cluster.devices)}${over} = ${s.stages} stage${s.stages === 1 ? "" : "s"} × ${s.dataParallel} data-parallel${s.tensorParallel > 1 ? ` × ${s.tensorParallel} tensor-parallel${s.sequenceParallel ? " (sequence-parallel)" : ""}` : ""}, ${s.microBatches} micro-batch${s.microBatches === 1 ? "" : "es"}, ${s.schedule}, shard ${s.shard}\n`);
      }
      let elapsed = 0;
      let offset = 0; // steps done before this run (a resumed checkpoint's)
      // Ctrl-C, and SIGTERM (what Slurm and Kubernetes send before they kill), stop at the next step boundary;
      // a second one exits at once, as usual.
      let stop: "SIGINT" | "SIGTERM" | undefined;
      const onSignal = (signal: "SIGINT" | "SIGTERM"): void => {
        if (stop) process.exit(signal === "SIGINT" ? 130 : 143);
        stop = signal;
        io.stderr(`\nstopping after the current step (${signal === "SIGINT" ? "Ctrl-C" : "SIGTERM"} again to abort)\n`);
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      let summary: Awaited<ReturnType<typeof runPlan>>;
      try {
        summary = await runPlan(plan, {
          stopRequested: () => stop ?? false,
          world,
          ...(saveDir !== undefined && { save: { dir: saveDir, ...(saveEvery !== undefined && { every: saveEvery }) } }),
          ...(resumeDir !== undefined && { resume: resumeDir }),
          ...(initPath !== undefined && { init: initPath }),
          ...(fault && { injectFault: fault }),
          ...(timeoutText !== undefined && { timeoutSeconds: Number(timeoutText) }),
          device: device.kind,
          steps: total,
          ...(engineText !== undefined && { engine: engineText as Engine }),
          ...((tracePath !== undefined || profile) && { trace: true }),
          ...(recorder && { onTimings: (step: number, timings: Parameters<ProfileRecorder["add"]>[1], seconds: number) => recorder.add(step, timings, seconds) }),
          onDone: (_engine, traceEvents) => {
            if (tracePath !== undefined && lead) writeAtomically(tracePath, JSON.stringify({ traceEvents, displayTimeUnit: "ms" }) + "\n");
          },
          onEngine: (engine: Engine) => {
            const text = engine === "native" && device.kind !== "cpu" ? GPU_ENGINE_TEXT : ENGINE_TEXT[engine];
            if (!json) io.stdout(`engine: ${text}${world!.size > 1 ? `, and MPI between the ${world!.size} processes` : ""}\n`);
          },
          onResume: (r) => {
            offset = r.step;
            const how = r.resharded ? `, resharded from a plan of ${r.devices} device${r.devices === 1 ? "" : "s"}` : "";
            if (!json) io.stdout(`resumed from ${resumeDir} after step ${r.step}${how}\n`);
            if (r.unverified.length > 0) io.stderr(`${resumeDir}: warning: ${unverifiedText(r.unverified)}\n`);
          },
          onStep: (r: StepReport) => {
            elapsed += r.seconds;
            const scaling = r.lossScale === undefined ? {} : { lossScale: r.lossScale, skipped: r.skipped ?? false };
            if (json) io.stdout(JSON.stringify({ step: r.step, loss: r.loss, seconds: r.seconds, tokensPerSecond: r.tokensPerSecond, ...scaling }) + "\n");
            else {
              // Steps count over the whole training run: a resumed run shows step first + k of first + total.
              const last = offset + total;
              const eta = (elapsed / (r.step - offset)) * (last - r.step);
              const skipped = r.skipped ? `  skipped: gradients overflowed at loss scale ${r.lossScale}` : "";
              const line = `step ${String(r.step).padStart(String(last).length)}/${last}  loss ${r.loss.toFixed(5)}  ${formatSeconds(r.seconds)}  ${Math.round(r.tokensPerSecond).toLocaleString("en-US")} tokens/s  ETA ${formatSeconds(eta)}${skipped}`;
              // On a terminal: a progress bar redrawn in place; elsewhere one plain line per step.
              if (io.isTTY) io.stdout(`\r${bar(r.step / last)} ${line}\x1b[K${r.step === last ? "\n" : ""}`);
              else io.stdout(line + "\n");
            }
          },
        });
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
      const profiled: RunProfile | undefined = recorder && peaks && recorder.steps > 0 ? recorder.finish(peaks) : undefined;
      if (json) io.stdout(JSON.stringify({ summary: profiled ? { ...summary, profile: profiled } : summary }) + "\n");
      else {
        io.stdout(`done: ${plural(summary.steps, "step")} in ${formatSeconds(summary.seconds)}, loss ${summary.firstLoss.toFixed(5)} → ${summary.finalLoss.toFixed(5)}${tracePath === undefined ? "" : `; trace in ${tracePath}`}\n`);
        // Measured over predicted, so a user sees when the cost model is wrong (`fsm calibrate` measures this machine).
        const ratio = (measured: number, predicted: number): string => (predicted > 0 ? `measured/predicted ${(measured / predicted).toFixed(2)}×` : "nothing predicted");
        const mode = summary.stepMode === "blocking" ? " (steps run on the loop's thread, batches made between them: faster here)" : "";
        io.stdout(`step time: measured ${formatSeconds(summary.measuredStepSeconds)} (median), predicted ${formatSeconds(summary.predictedStepSeconds)}: ${ratio(summary.measuredStepSeconds, summary.predictedStepSeconds)}${mode}\n`);
        if (summary.peakMemoryBytes) {
          const most = Math.max(...summary.peakMemoryBytes);
          const d = summary.peakMemoryBytes.indexOf(most);
          const predicted = formatBytes(summary.predictedPeakMemoryBytes[d]!);
          const model = formatBytes(summary.memoryPlanPeakBytes[d]!);
          io.stdout(
            summary.arenasFromPlan
              ? `memory: fullest device ${d} holds ${formatBytes(most)} (its arena; the plan's ${predicted}, as compile laid it out); its memory plan peaks at ${model}: ${ratio(most, summary.memoryPlanPeakBytes[d]!)}\n`
              : `memory: fullest device ${d} holds ${formatBytes(most)} (its arena), predicted ${predicted} (the plan's memory plan; compile did not lay out the arenas): ${ratio(most, summary.predictedPeakMemoryBytes[d]!)}\n`,
          );
        }
        if (profiled) io.stdout(formatProfile(profiled));
        else if (recorder && summary.steps > 0) io.stderr(`--profile: the ${summary.engine} engine records no per-instruction times, so there is no profile\n`);
      }
      // A clean end on every process: the MPI world is closed (mpirun counts a process that leaves it open as failed).
      world.finalize();
      if (summary.interrupted) {
        // The signal any process got (under mpirun one may have been signalled for all).
        const signal = summary.stopReason ?? stop;
        const by = signal === "SIGTERM" ? "SIGTERM" : "Ctrl-C";
        io.stderr(`interrupted by ${by} after step ${summary.steps} of ${total}${saveDir === undefined ? "" : `; checkpoint in ${saveDir}`}\n`);
        return signal === "SIGTERM" ? 143 : 130;
      }
      return 0;
    } catch (e) {
      // An error before the work, under mpirun: every process usually meets the same one (the same command and
      // files), and process 0 tells it; the others tell theirs only if they are still alive 2 s later — mpirun
      // ends the job as soon as process 0 exits non-zero, so an error met by one process alone (a file missing
      // on its host) is told, and one met by all is told once.
      const beforeWork = async (text: string): Promise<number> => {
        if (lead) io.stderr(text);
        else {
          await new Promise((r) => setTimeout(r, 2000));
          user.stderr(`[process ${launched!.rank}] ${text}`);
        }
        return 1;
      };
      if (e instanceof PlanError) return beforeWork(`${file}: error: invalid plan: ${e.message}\n`);
      if (e instanceof RunError || e instanceof CompileError) {
        // Under mpirun: a device's own failure is told by its process, prefixed with it; an echo of another
        // process's failure (kind aborted) is not told again; anything else is an error before the work.
        let out = io;
        let prefix = "";
        // (A non-finite loss is found by every process, from the all-gathered losses.)
        if (world && world.size > 1 && e instanceof RunError && e.failure && e.failure.kind !== "nan") {
          out = e.failure.kind === "aborted" ? { stdout: () => {}, stderr: () => {} } : user;
          prefix = `[process ${world.rank}] `;
        } else if (!lead && !(e instanceof RunError && e.failure)) {
          return beforeWork(`${file}: error: ${e.message}\n`);
        }
        // --json: a device's failure also as one JSON line, its fields as data (kind, step, device, action, op, ...).
        if (json && e instanceof RunError && e.failure) out.stdout(JSON.stringify({ error: { ...e.failure, text: e.message, ...(world && world.size > 1 && { process: world.rank }) } }) + "\n");
        out.stderr(`${prefix}${file}: error: ${e.message}\n`);
        return 1;
      }
      throw e;
    }
  },
};
