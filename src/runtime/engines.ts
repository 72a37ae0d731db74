// The engines `fsm run` can step a plan with, behind one interface: `native` (the plan lowered per device and
// run by the addon's cluster: an arena, a compute and a communication thread per device; cluster-engine.ts),
// `native-fused` (every device's work in one step program with one arena, run on one worker thread),
// `native-kernels` and `reference` (the reference executor driving the addon's or the interpreter's kernels
// action by action on this thread).
import { totalmem } from "node:os";
import type { Graph } from "../graph/graph.js";
import { numel } from "../graph/dim.js";
import { initParams } from "../interp/init.js";
import type { Kernel } from "../interp/kernels/kernel.js";
import { floatArray, type FloatTensor } from "../interp/tensor.js";
import { createNativeProgram } from "../native/binding.js";
import { hasNativeKernel, nativeKernel } from "../native/kernels.js";
import type { Plan } from "../plan/plan.js";
import { ReferenceExecutor, sliceBatch } from "./reference-step.js";
import { lowerStep } from "./step-program.js";
import { CheckpointError } from "../checkpoint/checkpoint.js";
import { initFromFile } from "../checkpoint/init-weights.js";
import { clusterEngine } from "./cluster-engine.js";
import { EngineError, type InjectedFault, type StepEngine } from "./engine-types.js";
import { stepEvents, traceMetadata, type TraceEvent } from "./trace.js";

export { EngineError, FAULT_KINDS, type InjectedFault, type StepEngine } from "./engine-types.js";

export const ENGINES = ["native", "native-fused", "native-kernels", "reference"] as const;
export type Engine = (typeof ENGINES)[number];

function requireNativeKernels(graph: Graph, engine: Engine): void {
  const missing = [...new Set(graph.ops().map((o) => o.op))].filter((op) => !hasNativeKernel(op));
  if (missing.length > 0) throw new EngineError(`engine ${engine}: not implemented yet for ops ${missing.join(", ")} (use --engine reference)`);
}

/** native when the addon is built and has a kernel for every op of the graph, else reference. */
export function defaultEngine(graph: Graph): Engine {
  try {
    return graph.ops().every((o) => hasNativeKernel(o.op)) ? "native" : "reference";
  } catch {
    return "reference"; // the addon is not built or does not load: the TypeScript kernels still run
  }
}

/** How an engine is built besides its plan: tracing, starting weights, a fault to inject, the peers' timeout. */
export interface EngineOptions {
  /** Record a Chrome trace of every step (native engines). */
  readonly trace?: boolean;
  /** Start from the weights in this safetensors file instead of the seed's. */
  readonly init?: string;
  readonly fault?: InjectedFault;
  /** Seconds a device waits for its peers before the step fails (native; default 60). */
  readonly timeoutSeconds?: number;
}

export function createEngine(engine: Engine, plan: Plan, graph: Graph, seed: number, options: EngineOptions = {}): StepEngine {
  const { trace = false, init, fault, timeoutSeconds } = options;
  if (trace && engine !== "native" && engine !== "native-fused") throw new EngineError(`a trace is recorded by the native engines only (not ${engine})`);
  // The faults strike the native cluster's devices (their threads, communicator and arenas).
  if (fault && engine !== "native") throw new EngineError(`--inject-fault works with the native engine only (not ${engine})`);
  if (engine !== "native" && plan.settings.precision !== "fp32") {
    throw new EngineError(`engine ${engine} runs fp32 only; precision ${plan.settings.precision} (16-bit storage, fp32 compute${plan.settings.precision === "fp16" ? ", loss scaling" : ""}) runs on the native engine`);
  }
  const params = initParams(graph, seed, "f32");
  if (init !== undefined) {
    try {
      initFromFile(init, graph, params);
    } catch (e) {
      if (e instanceof CheckpointError) throw new EngineError(e.message);
      throw e;
    }
  }
  if (engine === "native") {
    requireNativeKernels(graph, engine);
    return clusterEngine(plan, graph, params, trace, timeoutSeconds, fault);
  }
  if (engine === "native-fused") return nativeEngine(plan, graph, params, trace);
  let kernels: ((op: string) => Kernel) | undefined;
  if (engine === "native-kernels") {
    requireNativeKernels(graph, engine);
    kernels = nativeKernel;
  }
  const exec = new ReferenceExecutor(plan, graph, "f32", kernels);
  const state = {
    params,
    state: new Map(graph.states().map((s): [string, FloatTensor] => [s.name, { shape: s.type.shape.map((d) => numel([d])), data: floatArray("f32", numel(s.type.shape)) }])),
  };
  return {
    step: async (batch) => exec.step(state, batch).loss,
    param: (name) => state.params.get(name)!.data as Float32Array,
  };
}

/** A native failure ("instruction 17 (linear): ...") as an error naming the device and plan action. */
function failedInstruction(e: unknown, program: ReturnType<typeof lowerStep>): Error {
  const message = e instanceof Error ? e.message : String(e);
  const m = /^instruction (\d+) \(([^)]+)\): (.*)$/s.exec(message);
  if (!m) return e instanceof Error ? e : new Error(message);
  const tag = program.instructions[Number(m[1])]!.tag;
  const where = tag.rank === null ? "the optimizer step" : `device ${tag.rank}, action ${tag.action}`;
  return new EngineError(`${where}: kernel ${m[2]} failed: ${m[3]}`);
}

function nativeEngine(plan: Plan, graph: Graph, params: Map<string, FloatTensor>, trace: boolean): StepEngine {
  requireNativeKernels(graph, "native-fused");
  const program = lowerStep(plan, graph);
  // The program reuses bytes between values never live together but does not follow the plan's memory plan
  // yet: refuse what this machine cannot hold rather than fail inside the allocator.
  const limit = 0.8 * totalmem();
  if (program.arenaBytes > limit) {
    throw new EngineError(
      `engine native-fused: the step needs ${(program.arenaBytes / 2 ** 30).toFixed(2)} GiB in one arena (values laid out by their lifetimes; the plan's memory plan is not followed yet) but this machine has ${(totalmem() / 2 ** 30).toFixed(1)} GiB; use fewer micro-batches or a smaller batch`,
    );
  }
  const handle = createNativeProgram(program);
  for (const [name, slot] of program.paramSlots) handle.set(slot, params.get(name)!.data as Float32Array);
  const { dataParallel: dp, microBatches: m, microBatchSize: mbs } = plan.settings;
  const events: TraceEvent[] = trace ? traceMetadata(plan.cluster.devices) : [];
  const origin = performance.now();
  let steps = 0;
  return {
    trace: () => events,
    step: async (batch) => {
      for (let r = 0; r < dp; r++) {
        for (let j = 0; j < m; j++) {
          const rows = sliceBatch(batch, (r * m + j) * mbs, mbs);
          for (const [name, slot] of Object.entries(program.inputSlots[r]![j]!)) handle.set(slot, rows[name]!.data as Float32Array | Int32Array);
        }
      }
      const startUs = (performance.now() - origin) * 1e3;
      try {
        await handle.run(trace);
      } catch (e) {
        throw failedInstruction(e, program);
      }
      if (trace) events.push(...stepEvents(program, handle.timings(), startUs, ++steps));
      // The mean in double, summed in the reference executor's order.
      let loss = 0;
      for (const slot of program.lossSlots) loss += handle.get(slot)[0]!;
      return loss / (dp * m);
    },
    param: (name) => handle.get(program.paramSlots.get(name)!) as Float32Array,
    memoryBytes: handle.arenaBytes(),
  };
}
