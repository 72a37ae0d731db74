// `fsm run`'s training loop over a plan: parameters initialized from the seed, the synthetic data the plan's
// train section names, one step per iteration on the engine, and a report per step. Both engines today are
// the reference executor (reference-step.ts) — with the interpreter's kernels or the addon's; the native
// runtime (threads per device, arenas, overlapped communication) plugs in behind the same loop.
import { syntheticData } from "../data/synthetic.js";
import { initParams } from "../interp/init.js";
import { floatArray, type FloatTensor } from "../interp/tensor.js";
import { numel } from "../graph/dim.js";
import { graphFromJson } from "../plan/graph-from-json.js";
import type { Plan } from "../plan/plan.js";
import { ReferenceExecutor } from "./reference-step.js";
import type { Graph } from "../graph/graph.js";
import type { Kernel } from "../interp/kernels/kernel.js";
import { hasNativeKernel, nativeKernel } from "../native/kernels.js";

export class RunError extends Error {}

export interface StepReport {
  readonly step: number;
  readonly loss: number;
  readonly seconds: number;
  readonly tokensPerSecond: number;
}

/** `reference`: the interpreter's TypeScript kernels; `native-kernels`: the addon's C++ kernels (OpenBLAS),
 *  both driven action by action by the reference executor on one thread. */
export type Engine = "reference" | "native-kernels";

export interface RunSummary {
  readonly engine: Engine;
  readonly steps: number;
  readonly firstLoss: number;
  readonly finalLoss: number;
  readonly seconds: number;
  readonly predictedStepSeconds: number;
  readonly measuredStepSeconds: number;
}

export interface RunOptions {
  readonly steps?: number;
  readonly engine?: Engine;
  /** Told which engine runs, before the first step. */
  readonly onEngine?: (engine: Engine) => void;
  readonly onStep?: (r: StepReport) => void;
}

/** The addon's kernels, after checking it has one for every op of the graph (a clear error otherwise). */
function nativeKernelsFor(graph: Graph): (op: string) => Kernel {
  const missing = [...new Set(graph.ops().map((o) => o.op))].filter((op) => !hasNativeKernel(op));
  if (missing.length > 0) throw new RunError(`engine native-kernels: not implemented yet for ops ${missing.join(", ")} (use --engine reference)`);
  return nativeKernel;
}

/** native-kernels when the addon is built and has a kernel for every op of the graph, else reference. */
export function defaultEngine(graph: Graph): Engine {
  try {
    return graph.ops().every((o) => hasNativeKernel(o.op)) ? "native-kernels" : "reference";
  } catch {
    return "reference"; // the addon is not built or does not load: the TypeScript kernels still run
  }
}

export function runPlan(plan: Plan, options: RunOptions = {}): RunSummary {
  const run = plan.run;
  if (!run) throw new RunError("the plan has no run section (it was written before `fsm run` existed): compile it again");
  if (run.data.kind !== "synthetic") {
    throw new RunError(`data = ${run.data.kind}(...) is not implemented yet: \`fsm run\` reads synthetic data only so far (token and .npy loaders come with checkpoints and real data)`);
  }
  const steps = options.steps ?? run.steps;
  if (!(Number.isInteger(steps) && steps >= 1)) throw new RunError(`steps must be a positive integer, got ${steps}`);
  const graph = graphFromJson(plan.model.name, plan.graph);
  const engine = options.engine ?? defaultEngine(graph);
  const exec = new ReferenceExecutor(plan, graph, "f32", engine === "native-kernels" ? nativeKernelsFor(graph) : undefined);
  options.onEngine?.(engine);
  const state = {
    params: initParams(graph, run.seed, "f32"),
    state: new Map(graph.states().map((s): [string, FloatTensor] => [s.name, { shape: s.type.shape.map((d) => numel([d])), data: floatArray("f32", numel(s.type.shape)) }])),
  };
  const seq = plan.settings.seq;
  const data = syntheticData(graph, { batch: plan.settings.batch, ...(seq !== null && { seq }), seed: run.seed });
  const tokens = plan.settings.batch * (seq ?? 1);
  const started = performance.now();
  let firstLoss = NaN;
  let finalLoss = NaN;
  for (let step = 1; step <= steps; step++) {
    const t0 = performance.now();
    const { loss } = exec.step(state, data.batch(step - 1));
    const seconds = (performance.now() - t0) / 1000;
    if (!Number.isFinite(loss)) throw new RunError(`step ${step}: the loss is ${loss}`);
    if (step === 1) firstLoss = loss;
    finalLoss = loss;
    options.onStep?.({ step, loss, seconds, tokensPerSecond: tokens / seconds });
  }
  const seconds = (performance.now() - started) / 1000;
  return { engine, steps, firstLoss, finalLoss, seconds, predictedStepSeconds: plan.predicted.stepTimeSeconds, measuredStepSeconds: seconds / steps };
}
