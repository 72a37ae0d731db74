// The `native` engine: a plan lowered per device (cluster-program.ts) and run by the addon's cluster — each
// virtual device with its own arena and a compute and a communication stream, each stream on a thread of its
// own, or the devices taking turns on as many host threads as the cores where a thread per stream would
// outnumber them (hostThreadsFor, world.ts), all sharing one in-process communicator.
import { availableParallelism, totalmem } from "node:os";
import type { Graph } from "../graph/graph.js";
import type { FloatTensor } from "../interp/tensor.js";
import { createNativeCluster, nativeFailure } from "../native/binding.js";
import type { Plan } from "../plan/plan.js";
import { programOfRank } from "../plan/listing.js";
import { localIndex, lower, type ClusterProgram } from "../lower/lower.js";
import { getProfile } from "../cost/cluster.js";
import { faultTarget } from "./fault-target.js";
import { LossScaler } from "./loss-scaler.js";
import { CheckpointError, loadCheckpoint, saveCheckpoint } from "../checkpoint/checkpoint.js";
import { SafetensorsError } from "../checkpoint/safetensors.js";
import { feedBatch, lossValues, mean } from "./cluster-step.js";
import { readParam, writeParams, type DeviceSlots } from "../lower/param-pieces.js";
import { EngineError, type InjectedFault, type RunFailure, type StepEngine } from "./engine-types.js";
import { deviceEvents, traceMetadata, type TraceEvent } from "./trace.js";
import { processesHere, hostThreadsFor, WorldError, type ProcessWorld } from "./world.js";
import type { DeviceKind } from "./device-choice.js";
import { placeDevices, PlacementError, type Placement } from "./gpu-placement.js";

/** A native failure (structured: kind, device, instruction, op, peers, busy) as an error naming the device and
 *  its plan action; the same fields travel on as data (RunFailure). */
function stepFailure(e: unknown, program: ClusterProgram): Error {
  const f = nativeFailure(e);
  // Another process's failure, heard from it (no device of this process failed): an echo with its cause.
  if (f?.kind === "aborted" && f.localDevice === undefined) return new EngineError(f.message, { kind: "aborted", message: f.message });
  if (!f || f.localDevice === undefined || f.instruction === undefined) return e instanceof Error ? e : new Error(String(e));
  const device = program.ranks[f.localDevice]!;
  const action = program.devices[f.localDevice]!.instructions[f.instruction]?.action ?? `instruction ${f.instruction}`;
  const busy = (f.busy ?? []).map((b) => ({ device: b.device, action: program.devices[localIndex(program, b.device)]!.instructions[b.instruction]?.action ?? `instruction ${b.instruction}`, op: b.op, seconds: b.seconds }));
  const kind = f.kind === "kernel" || f.kind === "comm" || f.kind === "timeout" || f.kind === "hang" ? f.kind : "aborted";
  const failure: RunFailure = { kind, device, action, ...(f.op !== undefined && { op: f.op }), ...(f.peers && { peers: f.peers }), ...(busy.length > 0 && { busy }), message: f.message };
  // The human line: where, what, and for a timeout the devices busy computing all along (the likelier cause).
  const note = busy.length === 0 ? "" : `; busy computing, not waiting: ${busy.map((b) => `device ${b.device}, action ${b.action} (${b.op}) for ${b.seconds.toFixed(1)} s`).join(", ")}`;
  const what = f.op?.startsWith("comm.") ? "communication" : "kernel";
  return new EngineError(`device ${device}, action ${action}: ${what} ${f.op} failed: ${f.message}${note}`, failure);
}

const size = (n: number): string => `${n} bytes (${(n / 2 ** 20).toFixed(2)} MiB)`;

/** The executor's refusal of a device's arena (larger than the device's memory, or one it could not allocate)
 *  as an error that says what the plan predicted and what to do. */
function outOfMemory(e: unknown, plan: Plan, program: ClusterProgram, fault: InjectedFault | undefined): Error {
  const f = nativeFailure(e);
  if (f?.kind !== "oom" || f.localDevice === undefined || f.arenaBytes === undefined) return e instanceof Error ? e : new Error(String(e));
  const d = program.ranks[f.localDevice]!;
  const injected = fault?.kind === "oom" ? " (--inject-fault oom: its limit set below its arena)" : "";
  const what = f.limitBytes !== undefined ? `its arena needs ${size(f.arenaBytes)} but the device has ${size(f.limitBytes)}${injected}` : `this machine cannot allocate its arena of ${size(f.arenaBytes)}`;
  const failure: RunFailure = { kind: "oom", device: d, arenaBytes: f.arenaBytes, ...(f.limitBytes !== undefined && { limitBytes: f.limitBytes }), message: what };
  return new EngineError(
    `device ${d} is out of memory: ${what}; the plan predicted a peak of ${size(plan.predicted.peakMemoryBytes[d] ?? 0)} for it. ` +
      "Use more micro-batches (--set parallel.chunks=N), activation checkpointing (--set parallel.checkpoint=always), a sharding strategy (--set parallel.shard=fsdp) or more devices",
    failure,
  );
}

/** How the engine runs besides its plan: a trace, the peers' timeout, a fault to inject, and this process's
 *  share of the run's processes (alone: every device). */
export interface ClusterEngineOptions {
  readonly trace: boolean;
  readonly timeoutSeconds: number;
  readonly fault?: InjectedFault;
  readonly world: ProcessWorld;
  /** The devices' kind: cpu virtual devices, CUDA GPUs, or the CUDA device's code emulated (simt). */
  readonly device: DeviceKind;
  /** CPU devices: host threads that take turns on the devices, or 0 for one per stream (default:
   *  hostThreadsFor, world.ts). */
  readonly hostThreads?: number;
}

/** A plan carrying the arenas compile laid out (memory[p].runtime) must get exactly those here: they are the
 *  memory compile predicted and checked against the device. Another lowering (a plan from another fsm, or an
 *  edited one) is refused rather than run with memory nobody checked. */
function checkRecordedArenas(plan: Plan, program: ClusterProgram, kernels16: boolean): void {
  // Recorded as the plan's profile runs it (compile/runtime-arenas.ts); a mixed-precision plan for GPUs run on
  // CPU devices (which widen 16-bit operands) lays out differently, and says so (device-choice.ts).
  let profileKernels16 = false;
  try {
    profileKernels16 = !getProfile(plan.cluster.profile).widens16BitOperands;
  } catch {
    // a profile this fsm does not know: its records are checked as the CPU's
  }
  if (plan.settings.precision !== "fp32" && profileKernels16 !== kernels16) return;
  program.ranks.forEach((rank, i) => {
    const { program: p, replica } = programOfRank(plan, rank)!;
    const recorded = plan.memory[p.id]!.runtime?.arenaBytes[replica];
    const laidOut = program.devices[i]!.arenaBytes;
    if (recorded !== undefined && recorded !== laidOut) {
      throw new EngineError(
        `the plan records an arena of ${recorded} bytes for device ${rank} (memory[${p.id}].runtime), but this fsm lays out ${laidOut}: the plan was compiled by another version of fsm or edited; compile it again`,
      );
    }
  });
}

export function clusterEngine(plan: Plan, graph: Graph, params: Map<string, FloatTensor>, options: ClusterEngineOptions): StepEngine {
  const { trace, timeoutSeconds, fault, world, device } = options;
  let ranks: number[];
  try {
    ranks = world.localRanks(plan.cluster.devices);
  } catch (e) {
    if (e instanceof WorldError) throw new EngineError(e.message);
    throw e;
  }
  // CUDA kernels (and their emulation) read 16-bit operands directly; the CPU's compute on widened copies.
  const kernels16 = device !== "cpu";

  const program = lower(plan, graph, ranks, undefined, { kernels16 });
  checkRecordedArenas(plan, program, kernels16);
  if (fault && !(Number.isInteger(fault.device) && fault.device >= 0 && fault.device < plan.cluster.devices)) {
    throw new EngineError(`--inject-fault: the plan has no device ${fault.device} (devices 0..${plan.cluster.devices - 1})`);
  }
  // The fault strikes the process that runs its device; the others meet it through the communicator.
  const local = fault !== undefined && ranks.includes(fault.device);
  const target = local && fault.kind !== "oom" ? faultTarget(program, fault) : undefined;
  const bytes = program.devices.reduce((n, d) => n + d.arenaBytes, 0);
  // Virtual devices share this machine's memory: refuse what it cannot hold rather than fail in the allocator
  // (the processes of a run on one machine share it too). A GPU's arena is its own memory's business.
  const limit = (0.8 * totalmem()) / processesHere();
  if (device !== "cuda" && bytes > limit) {
    throw new EngineError(
      `engine native: the ${program.devices.length} devices' arenas need ${(bytes / 2 ** 30).toFixed(2)} GiB together but this machine has ${(totalmem() / 2 ** 30).toFixed(1)} GiB; use fewer devices, more micro-batches or a smaller batch`,
    );
  }
  // Each device has the plan's device memory (an injected oom sets one device's below its arena).
  const memoryLimitBytes = program.devices.map((d, i) => (fault?.kind === "oom" && fault.device === program.ranks[i] ? Math.floor(d.arenaBytes / 2) : plan.cluster.memoryBytes));
  let placement: Placement;
  try {
    placement = placeDevices(device, ranks.length, world.size);
  } catch (e) {
    if (e instanceof PlacementError) throw new EngineError(e.message);
    throw e;
  }
  let cluster: ReturnType<typeof createNativeCluster>;
  try {
    // The cores shared out among the devices' compute threads (of every process on this machine): one device
    // gets every core for its sgemm calls, four devices on two cores one thread each (more would oversubscribe).
    const blasThreads = Math.max(1, Math.floor(availableParallelism() / (program.devices.length * processesHere())));
    const hostThreads = options.hostThreads ?? hostThreadsFor(program.devices.length);
    cluster = createNativeCluster({
      devices: program.devices,
      worldSize: plan.cluster.devices,
      ranks,
      ...placement,
      timeoutSeconds,
      memoryLimitBytes,
      blasThreads,
      hostThreads,
    });
  } catch (e) {
    throw outOfMemory(e, plan, program, fault);
  }
  // Records name devices by global rank; the executor numbers this process's devices from 0.
  const slots: DeviceSlots = {
    set: (d, slot, data) => cluster.set(localIndex(program, d), slot, data),
    get: (d, slot) => cluster.get(localIndex(program, d), slot),
  };
  writeParams(slots, program, (name) => params.get(name)!.data as Float32Array);
  const { microBatches: m, microBatchSize: mbs } = plan.settings;
  const events: TraceEvent[] = trace ? traceMetadata(program.ranks) : [];
  const origin = performance.now();
  // The rows of the global batch this process's devices are fed: its replicas' (a contiguous range, since a
  // process runs a contiguous block of ranks), so a process reads only its share of a data file.
  const fed = program.inputs.flatMap(({ replica, slots }) => (slots.some((s) => Object.keys(s).length > 0) ? [replica] : []));
  const perReplica = m * mbs;
  const rows = fed.length === 0 ? { from: 0, count: 0 } : { from: Math.min(...fed) * perReplica, count: (Math.max(...fed) - Math.min(...fed) + 1) * perReplica };
  let steps = 0;
  const scaler = program.lossScaling ? LossScaler.of(plan.run?.lossScale) : undefined;
  let last = { skipped: false, lossScale: scaler?.scale ?? 1 };
  return {
    // Only fp16 has a loss scale to report (and steps it may skip).
    ...(scaler && { lastStep: () => last }),
    trace: () => events,
    lastTimings: () => program.devices.map((d, i) => ({ program: d, timings: trace ? cluster.timings(i) : new Float64Array(0) })),
    rows,
    traceOrigin: performance.timeOrigin + origin,
    bytesSent: () => cluster.communicatorBytes(),
    // CPU devices only: a GPU's streams have run on worker threads alone (its context is the process's, but
    // nothing here has checked it from the JavaScript thread on a GPU).
    canBlock: device === "cpu",
    step: async (batch, blocking) => {
      feedBatch(slots, program, batch, m, mbs, rows.from);
      const scale = scaler?.scale;
      if (scale !== undefined) {
        program.lossScaling!.forEach((s, i) => {
          if (s.scale !== undefined) cluster.set(i, s.scale, Float32Array.of(scale));
          cluster.set(i, s.inverse, Float32Array.of(1 / scale));
        });
      }
      // Armed for this run only: the fault strikes the fault.step-th step.
      if (target && steps + 1 === fault!.step) cluster.injectFault(localIndex(program, fault!.device), target.instruction, target.kind);
      const startUs = (performance.now() - origin) * 1e3;
      try {
        if (blocking) cluster.runSync(trace);
        else await cluster.run(trace);
      } catch (e) {
        throw stepFailure(e, program);
      }
      steps++;
      if (scaler) {
        // Every device all-reduced the same verdict; this process's first device's copy speaks for all.
        const skipped = cluster.get(0, program.lossScaling![0]!.overflow)[0]! !== 0;
        last = { skipped, lossScale: scaler.scale };
        scaler.update(skipped);
      }
      if (trace) program.devices.forEach((d, i) => events.push(...deviceEvents(program.ranks[i]!, d, cluster.timings(i), startUs, steps)));
      // Every process's losses (replica, micro-batch, device, value), merged replica-major as one process has them.
      const mine = lossValues(slots, program).flatMap((l, i) => [program.lossSlots[i]!.replica, program.lossSlots[i]!.mb, program.lossSlots[i]!.device, l]);
      const losses = (await world.allGather(Float64Array.from(mine), timeoutSeconds))
        .flatMap((a) => Array.from({ length: a.length / 4 }, (_, k) => ({ replica: a[4 * k]!, mb: a[4 * k + 1]!, device: a[4 * k + 2]!, loss: a[4 * k + 3]! })))
        .sort((x, y) => x.replica - y.replica || x.mb - y.mb);
      // A non-finite loss stops the run, naming where it appeared (the first device and micro-batch).
      const bad = losses.find((l) => !Number.isFinite(l.loss));
      if (bad) {
        const message = `the loss is ${bad.loss} (training diverged or the data is bad; with fp16, loss scaling skips only overflowing gradients, not a non-finite loss)`;
        throw new EngineError(`device ${bad.device}, micro-batch ${bad.mb}: ${message}`, { kind: "nan", device: bad.device, microBatch: bad.mb, message });
      }
      return mean(losses.map((l) => l.loss));
    },
    param: (name) => readParam(slots, program, name),
    checkpoint: {
      save: (dir, step) => saveCheckpoint(dir, plan, program, slots, step, world, timeoutSeconds, scaler?.state),
      load: (dir) => {
        let restored;
        try {
          restored = loadCheckpoint(dir, plan, program, slots);
        } catch (e) {
          if (e instanceof CheckpointError || e instanceof SafetensorsError) throw new EngineError(e.message);
          throw e;
        }
        const m = restored.manifest;
        if (scaler && m.lossScaler) scaler.restore(m.lossScaler);
        return { step: m.step, devices: m.devices, resharded: restored.resharded, unverified: restored.unverified };
      },
    },
    // A GPU's device memory is its arena and what it reserves besides (kernel scratch, cuBLAS workspace).
    memoryBytes: program.devices.reduce((n, d, i) => n + d.arenaBytes + cluster.reservedBytes(i), 0),
    deviceMemoryBytes: program.devices.map((d, i) => d.arenaBytes + cluster.reservedBytes(i)),
  };
}
