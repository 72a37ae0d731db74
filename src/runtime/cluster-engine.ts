// The `native` engine: a plan lowered per device (cluster-program.ts) and run by the addon's cluster — each
// virtual device with its own arena, a compute thread and a communication thread, all sharing one
// in-process communicator.
import { availableParallelism, totalmem } from "node:os";
import type { Graph } from "../graph/graph.js";
import type { FloatTensor } from "../interp/tensor.js";
import { createNativeCluster } from "../native/binding.js";
import type { Plan } from "../plan/plan.js";
import { lower } from "../lower/lower.js";
import { faultTarget } from "./fault-target.js";
import { LossScaler } from "./loss-scaler.js";
import { CheckpointError, loadCheckpoint, saveCheckpoint } from "../checkpoint/checkpoint.js";
import { SafetensorsError } from "../checkpoint/safetensors.js";
import { feedBatch, lossValues, mean } from "./cluster-step.js";
import { readParam, writeParams } from "../lower/param-pieces.js";
import { EngineError, type InjectedFault, type StepEngine } from "./engine-types.js";
import { deviceEvents, traceMetadata, type TraceEvent } from "./trace.js";

/** "device 2 instruction 17 (linear): message" as an error naming the device and plan action. */
function failedInstruction(e: unknown, program: ReturnType<typeof lower>): Error {
  const message = e instanceof Error ? e.message : String(e);
  const m = /^device (\d+) instruction (\d+) \(([^)]+)\): (.*)$/s.exec(message);
  if (!m) return e instanceof Error ? e : new Error(message);
  const ins = program.devices[Number(m[1])]?.instructions[Number(m[2])];
  if (!ins) return new EngineError(message);
  // Other instructions the message names (a timeout's busy devices) by their plan actions too.
  const detail = m[4]!.replace(/device (\d+) instruction (\d+) \(([^)]+)\)/g, (all, d: string, i: string, op: string) => {
    const other = program.devices[Number(d)]?.instructions[Number(i)];
    return other ? `device ${d}, action ${other.action} (${op})` : all;
  });
  return new EngineError(`device ${m[1]}, action ${ins.action}: ${m[3]!.startsWith("comm.") ? "communication" : "kernel"} ${m[3]} failed: ${detail}`);
}

const size = (n: number): string => `${n} bytes (${(n / 2 ** 20).toFixed(2)} MiB)`;

/** The native cluster's refusal of a device's arena ("device D: its arena of N bytes exceeds its memory limit
 *  of M bytes", or one it could not allocate) as an error that says what the plan predicted and what to do. */
function outOfMemory(e: unknown, plan: Plan, fault: InjectedFault | undefined): Error {
  const message = e instanceof Error ? e.message : String(e);
  const m = /^device (\d+): (?:its arena of (\d+) bytes exceeds its memory limit of (\d+) bytes|cannot allocate its arena of (\d+) bytes: out of memory)$/.exec(message);
  if (!m) return e instanceof Error ? e : new Error(message);
  const d = Number(m[1]);
  const injected = fault?.kind === "oom" ? " (--inject-fault oom: its limit set below its arena)" : "";
  const what = m[2] !== undefined ? `its arena needs ${size(Number(m[2]))} but the device has ${size(Number(m[3]))}${injected}` : `this machine cannot allocate its arena of ${size(Number(m[4]))}`;
  return new EngineError(
    `device ${d} is out of memory: ${what}; the plan predicted a peak of ${size(plan.predicted.peakMemoryBytes[d] ?? 0)} for it. ` +
      "Use more micro-batches (--set parallel.chunks=N), activation checkpointing (--set parallel.checkpoint=always), a sharding strategy (--set parallel.shard=fsdp) or more devices",
  );
}

export function clusterEngine(plan: Plan, graph: Graph, params: Map<string, FloatTensor>, trace: boolean, timeoutSeconds = 60, fault?: InjectedFault): StepEngine {
  const program = lower(plan, graph);
  if (fault && !(Number.isInteger(fault.device) && fault.device >= 0 && fault.device < program.devices.length)) {
    throw new EngineError(`--inject-fault: the plan has no device ${fault.device} (devices 0..${program.devices.length - 1})`);
  }
  const target = fault && fault.kind !== "oom" ? faultTarget(program, fault) : undefined;
  const bytes = program.devices.reduce((n, d) => n + d.arenaBytes, 0);
  // Virtual devices share this machine's memory: refuse what it cannot hold rather than fail in the allocator.
  const limit = 0.8 * totalmem();
  if (bytes > limit) {
    throw new EngineError(
      `engine native: the ${program.devices.length} devices' arenas need ${(bytes / 2 ** 30).toFixed(2)} GiB together but this machine has ${(totalmem() / 2 ** 30).toFixed(1)} GiB; use fewer devices, more micro-batches or a smaller batch`,
    );
  }
  // Each device has the plan's device memory (an injected oom sets one device's below its arena).
  const memoryLimitBytes = program.devices.map((d, i) => (fault?.kind === "oom" && fault.device === i ? Math.floor(d.arenaBytes / 2) : plan.cluster.memoryBytes));
  let cluster: ReturnType<typeof createNativeCluster>;
  try {
    // The cores shared out among the devices' compute threads: one device gets every core for its sgemm calls,
    // four devices on two cores one thread each (more would oversubscribe them).
    const blasThreads = Math.max(1, Math.floor(availableParallelism() / program.devices.length));
    cluster = createNativeCluster({ devices: program.devices, timeoutSeconds, memoryLimitBytes, blasThreads });
  } catch (e) {
    throw outOfMemory(e, plan, fault);
  }
  writeParams(cluster, program, (name) => params.get(name)!.data as Float32Array);
  const { microBatches: m, microBatchSize: mbs } = plan.settings;
  const events: TraceEvent[] = trace ? traceMetadata(program.devices.length) : [];
  const origin = performance.now();
  let steps = 0;
  const scaler = program.lossScaling ? LossScaler.of(plan.run?.lossScale) : undefined;
  let last = { skipped: false, lossScale: scaler?.scale ?? 1 };
  return {
    // Only fp16 has a loss scale to report (and steps it may skip).
    ...(scaler && { lastStep: () => last }),
    trace: () => events,
    lastTimings: () => program.devices.map((d, i) => ({ program: d, timings: trace ? cluster.timings(i) : new Float64Array(0) })),
    step: async (batch) => {
      feedBatch(cluster, program, batch, m, mbs);
      const scale = scaler?.scale;
      if (scale !== undefined) {
        program.lossScaling!.forEach((slots, d) => {
          if (slots.scale !== undefined) cluster.set(d, slots.scale, Float32Array.of(scale));
          cluster.set(d, slots.inverse, Float32Array.of(1 / scale));
        });
      }
      // Armed for this run only: the fault strikes the fault.step-th step.
      if (target && steps + 1 === fault!.step) cluster.injectFault(fault!.device, target.instruction, target.kind);
      const startUs = (performance.now() - origin) * 1e3;
      try {
        await cluster.run(trace);
      } catch (e) {
        throw failedInstruction(e, program);
      }
      steps++;
      if (scaler) {
        // Every device all-reduced the same verdict; device 0's copy speaks for all.
        const skipped = cluster.get(0, program.lossScaling![0]!.overflow)[0]! !== 0;
        last = { skipped, lossScale: scaler.scale };
        scaler.update(skipped);
      }
      if (trace) program.devices.forEach((d, i) => events.push(...deviceEvents(i, d, cluster.timings(i), startUs, steps)));
      // A non-finite loss stops the run, naming where it appeared (the first device and micro-batch).
      const losses = lossValues(cluster, program);
      const bad = losses.findIndex((l) => !Number.isFinite(l));
      if (bad >= 0) {
        throw new EngineError(`device ${program.lossSlots[bad]!.device}, micro-batch ${bad % m}: the loss is ${losses[bad]} (training diverged or the data is bad; with fp16, loss scaling skips only overflowing gradients, not a non-finite loss)`);
      }
      return mean(losses);
    },
    param: (name) => readParam(cluster, program, name),
    checkpoint: {
      save: (dir, step) => saveCheckpoint(dir, plan, program, cluster, step, scaler?.state),
      load: (dir) => {
        let restored;
        try {
          restored = loadCheckpoint(dir, plan, program, cluster);
        } catch (e) {
          if (e instanceof CheckpointError || e instanceof SafetensorsError) throw new EngineError(e.message);
          throw e;
        }
        const m = restored.manifest;
        if (scaler && m.lossScaler) scaler.restore(m.lossScaler);
        return { step: m.step, devices: m.devices, resharded: restored.resharded };
      },
    },
    memoryBytes: bytes,
    deviceMemoryBytes: program.devices.map((d) => d.arenaBytes),
  };
}
