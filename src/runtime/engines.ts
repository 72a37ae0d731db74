// The engines `fsm run` can step a plan with, behind one interface: `native` (the plan lowered per device and
// run by the addon's executor: an arena, a compute and a communication stream per device; cluster-engine.ts),
// `native-kernels` and `reference` (the reference executor driving the addon's or the interpreter's kernels
// action by action on this thread).
import type { Graph } from "../graph/graph.js";
import { numel } from "../graph/dim.js";
import { initParams } from "../interp/init.js";
import type { Kernel } from "../interp/kernels/kernel.js";
import { floatArray, type FloatTensor } from "../interp/tensor.js";
import { hasNativeKernel, nativeKernel } from "../native/kernels.js";
import { COMMUNICATOR_OPS } from "../lower/tensor-parallel.js";
import type { Plan } from "../plan/plan.js";
import { ReferenceExecutor } from "./reference-step.js";
import { CheckpointError } from "../checkpoint/checkpoint.js";
import { initFromFile } from "../checkpoint/init-weights.js";
import { clusterEngine } from "./cluster-engine.js";
import { EngineError, type InjectedFault, type StepEngine } from "./engine-types.js";
import { processWorld, WorldError, type ProcessWorld } from "./world.js";
import type { DeviceKind } from "./device-choice.js";

export { EngineError, FAULT_KINDS, type InjectedFault, type StepEngine } from "./engine-types.js";

export const ENGINES = ["native", "native-kernels", "reference"] as const;
export type Engine = (typeof ENGINES)[number];

function requireNativeKernels(graph: Graph, engine: Engine, device: DeviceKind = "cpu"): void {
  // A tensor-parallel graph's collectives are communicator calls, not kernels (src/lower/tensor-parallel.ts).
  const missing = [...new Set(graph.ops().map((o) => o.op))].filter((op) => !COMMUNICATOR_OPS.has(op) && !hasNativeKernel(op, device));
  if (missing.length > 0) throw new EngineError(`engine ${engine}: not implemented yet on device kind ${device} for ops ${missing.join(", ")}${device === "cpu" ? " (use --engine reference)" : ""}`);
}

/** native when the addon is built and has a kernel for every op of the graph, else reference. */
export function defaultEngine(graph: Graph): Engine {
  try {
    return graph.ops().every((o) => COMMUNICATOR_OPS.has(o.op) || hasNativeKernel(o.op)) ? "native" : "reference";
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
  /** This run's processes (native; default: this process alone runs every device). */
  readonly world?: ProcessWorld;
  /** The device kind the native engine's devices are (default cpu; device-choice.ts picks it for fsm run). */
  readonly device?: DeviceKind;
  /** Native CPU devices: host threads that take turns on the devices, or 0 for one per stream (default: by
   *  the cores, cluster-engine.ts). */
  readonly hostThreads?: number;
}

export function createEngine(engine: Engine, plan: Plan, graph: Graph, seed: number, options: EngineOptions = {}): StepEngine {
  const { trace = false, init, fault, timeoutSeconds = 60, device = "cpu" } = options;
  let world: ProcessWorld;
  try {
    world = options.world ?? processWorld();
  } catch (e) {
    if (e instanceof WorldError) throw new EngineError(e.message);
    throw e;
  }
  if (world.size > 1 && engine !== "native") throw new EngineError(`engine ${engine} runs in one process; under mpirun (${world.size} processes) use the native engine`);
  if (trace && engine !== "native") throw new EngineError(`a trace is recorded by the native engine only (not ${engine})`);
  if (device !== "cpu" && engine !== "native") throw new EngineError(`--device ${device} runs the native engine only (not ${engine})`);
  // The faults strike the native cluster's devices (their threads, communicator and arenas).
  if (fault && engine !== "native") throw new EngineError(`--inject-fault works with the native engine only (not ${engine})`);
  if (engine !== "native" && plan.settings.precision !== "fp32") {
    throw new EngineError(`engine ${engine} runs fp32 only; precision ${plan.settings.precision} (16-bit storage, fp32 compute${plan.settings.precision === "fp16" ? ", loss scaling" : ""}) runs on the native engine`);
  }
  if (plan.settings.tensorParallel > 1 && engine !== "native") {
    throw new EngineError(`engine ${engine} runs one device's graph at a time; a tensor-parallel plan (tensor_parallel = ${plan.settings.tensorParallel}) runs on the native engine`);
  }
  // Every engine accumulates and reduces gradients in fp32 (the communicators sum f32 only).
  if (plan.settings.reduceDtype !== undefined && plan.settings.reduceDtype !== "fp32") {
    throw new EngineError(`not implemented: gradients reduced in ${plan.settings.reduceDtype} (train.reduce_dtype); the runtime holds and reduces gradients in fp32: compile with reduce_dtype = fp32 (the default) to run this model`);
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
    requireNativeKernels(graph, engine, device);
    return clusterEngine(plan, graph, params, { trace, timeoutSeconds, world, device, ...(fault && { fault }), ...(options.hostThreads !== undefined && { hostThreads: options.hostThreads }) });
  }
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
