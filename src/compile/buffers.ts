// Step 7a of compile: every buffer a program's ranks hold during a step, as lifetimes over its actions:
// model state for the whole step, per micro-batch and layer activations (FairScale's stash; with checkpointing
// only the stage input until the recompute), pipeline send/receive buffers, recompute workspace, plus the gathered
// units and gradient staging the collective placement reported.
import type { ShardPlan } from "../shard/types.js";
import type { Lifetime } from "./lifetimes.js";
import type { Program } from "./program.js";
import type { StageCostModel } from "./stage-costs.js";

/** Largest per-rank model state of a stage's group: the program's arena must fit every replica. */
function stateOf(plan: ShardPlan): { param: number; grad: number; optimizer: number } {
  let param = 0;
  let grad = 0;
  let optimizer = 0;
  for (const r of plan.memory.perRank) {
    param = Math.max(param, r.param);
    grad = Math.max(grad, r.grad);
    optimizer = Math.max(optimizer, r.optimizer);
  }
  return { param, grad, optimizer };
}

/**
 * Where a stage's persistent gradients begin. Replicated (and OSS) stages make them in their first backward:
 * before it, and after the optimizer reads them, no step holds gradients (`zero_grad(set_to_none=True)`), so
 * a pipeline's forwards do not pay for them. Sharded (ZeRO-2/3) they are created by the stage's first
 * gradient collective, as FSDP allocates `param.grad` at its first reduce-scatter. That collective starts
 * once its dependency point is met (the runtime waits for it, no earlier), so the gradients begin there:
 * at the start of the layer segment it waits for, which is never after the runtime makes them.
 */
function gradientsFrom(program: Program, stage: number, sharded: boolean): { from: number; fromLayer?: number } | undefined {
  if (sharded) {
    const first = program.comm.find((id) => {
      const { kind, stage: s } = program.actions[id]!.action;
      return s === stage && (kind === "REDUCE_SCATTER" || kind === "REDUCE");
    });
    if (first !== undefined) {
      const a = program.actions[first]!;
      const point = a.partial[0];
      if (point) return { from: point[0], fromLayer: point[1] };
      return { from: a.deps.length > 0 ? Math.min(...a.deps) : first };
    }
  }
  const id = firstBackwardOf(program, stage);
  return id === undefined ? undefined : { from: id };
}

/** The stage's first backward action (B, I or W) on the program's compute stream. */
function firstBackwardOf(program: Program, stage: number): number | undefined {
  return program.compute.find((id) => {
    const { kind, stage: s } = program.actions[id]!.action;
    return s === stage && (kind === "B" || kind === "I" || kind === "W");
  });
}

export function programLifetimes(program: Program, p: number, shards: readonly ShardPlan[], costs: StageCostModel, extra: readonly Lifetime[]): Lifetime[] {
  const out: Lifetime[] = [];
  const first = program.compute[0]!;
  const lastId = program.compute[program.compute.length - 1]!;
  for (const stage of program.stages) {
    const st = stateOf(shards[stage]!);
    const strategy = shards[stage]!.strategy;
    const firstB = costs.activations[stage]!.firstBackward;
    const from = gradientsFrom(program, stage, strategy === "fsdp" || strategy === "sddp");
    for (const [kind, bytes] of [["param", st.param], ["grad", st.grad], ["optimizer", st.optimizer]] as const) {
      if (kind === "grad" && firstB?.gradientsByLayer && from && bytes > 0) {
        // Replicated/OSS: each layer's accumulators from the layer of the first backward that creates them.
        for (const { layer, bytes: b } of firstB.gradientsByLayer) {
          if (b > 0) out.push({ program: p, name: `s${stage} layer ${layer} gradients`, kind, bytes: b, from: from.from, fromLayer: layer, to: lastId, stage });
        }
        continue;
      }
      const start = kind === "grad" ? from ?? { from: first } : { from: first };
      if (bytes > 0) out.push({ program: p, name: `s${stage} ${kind === "param" ? "weights" : kind === "grad" ? "gradients" : "optimizer state"}`, kind, bytes, ...start, to: lastId, stage });
    }
  }
  // Actions by (kind, stage, mb) to pair forwards with their backwards and transfers.
  const find = new Map<string, number>();
  program.actions.forEach((a, id) => {
    const { kind, stage, mb } = a.action;
    if (mb !== undefined && (a.collective === undefined)) find.set(`${kind}:${stage}:${mb}`, id);
  });
  const get = (kind: string, stage: number, mb: number) => find.get(`${kind}:${stage}:${mb}`);
  // Each stage's first backward, looked up once (a replicated/OSS stage's creates its accumulators).
  const firstBackwards = new Map(program.stages.map((k) => [k, firstBackwardOf(program, k)] as const));
  for (const id of program.compute) {
    const { kind, stage, mb } = program.actions[id]!.action;
    if (kind !== "F" || mb === undefined) continue;
    const act = costs.activations[stage]!;
    const backward = get("B", stage, mb) ?? get("I", stage, mb);
    if (backward === undefined) throw new Error(`internal: stage ${stage} micro-batch ${mb} has a forward but no backward on program ${p}`);
    const tag = { stage, mb };
    const recv = get("RECV_F", stage, mb);
    if (act.input > 0) out.push({ program: p, name: `s${stage} mb ${mb} input`, kind: "activation", bytes: act.input, from: recv ?? id, to: backward, ...tag });
    const recompute = get("R", stage, mb);
    // Layer by layer: what a layer's forward (or the stage's recompute, R) keeps lives from that layer's
    // segment to the end of its backward's, so the backward frees the stash as it goes and a forward fills
    // it as it goes (a pipeline's next micro-batch meets a shrinking stash, not the whole stage's).
    for (const { layer, bytes } of act.byLayer) {
      if (bytes > 0) out.push({ program: p, name: `s${stage} mb ${mb} layer ${layer} activations`, kind: "activation", bytes, from: recompute ?? id, fromLayer: layer, to: backward, toLayer: layer, ...tag });
    }
    const w = get("W", stage, mb);
    // A split backward's W inputs, layer by layer from the I segment that reaches them to the end of W: the
    // stash drains as they fill (one buffer from I's start held every layer's stash and all of W's inputs
    // at once: 17–19% over the runtime's arenas for llama-7b's ZB-H1 plan on 2 stages × 8 replicas).
    if (w !== undefined) {
      for (const { layer, bytes } of act.weightGradByLayer) {
        if (bytes > 0) out.push({ program: p, name: `s${stage} mb ${mb} layer ${layer} weight-gradient inputs`, kind: "activation", bytes, from: backward, fromLayer: layer, to: w, ...tag });
      }
    }
    // The backward's own working set, layer by layer: the activation gradients it holds while a layer runs.
    const workingSet = act.firstBackward && backward === firstBackwards.get(stage) ? act.firstBackward.gradients : act.gradients;
    for (const { layer, bytes } of workingSet) {
      if (bytes > 0) out.push({ program: p, name: `s${stage} mb ${mb} layer ${layer} activation gradients`, kind: "workspace", bytes, from: backward, fromLayer: layer, to: backward, toLayer: layer, ...tag });
    }
    // The forward's own working set, layer by layer: what it holds beyond the stash while a layer runs (with
    // the stage recomputed later, its first forward keeps nothing and holds each layer's internals in turn).
    const working = (at: number, of: readonly { layer: number; bytes: number }[], what: string): void => {
      for (const { layer, bytes } of of) {
        if (bytes > 0) out.push({ program: p, name: `s${stage} mb ${mb} layer ${layer} ${what}`, kind: "workspace", bytes, from: at, fromLayer: layer, to: at, toLayer: layer, ...tag });
      }
    };
    working(id, recompute === undefined ? act.forward : act.forwardAlone, "forward working set");
    if (recompute !== undefined) working(recompute, act.forward, "recompute working set");
    // A @checkpoint layer's forward is rebuilt at the start of its backward and read by it alone.
    for (const { layer, bytes } of act.rebuilt) {
      if (bytes > 0) out.push({ program: p, name: `s${stage} mb ${mb} layer ${layer} recomputed`, kind: "workspace", bytes, from: backward, fromLayer: layer, to: backward, toLayer: layer, ...tag });
    }
    // Sent values exist from the layer that makes them, not from the start of their action.
    const sendF = get("SEND_F", stage, mb);
    if (sendF !== undefined) out.push({ program: p, name: `s${stage} mb ${mb} output`, kind: "comm", bytes: costs.boundaryBytes(stage, mb, "forward"), from: id, fromLayer: costs.sendLayer(stage, "forward"), to: sendF, ...tag });
    const recvB = get("RECV_B", stage, mb);
    if (recvB !== undefined) out.push({ program: p, name: `s${stage} mb ${mb} output gradient`, kind: "comm", bytes: costs.boundaryBytes(stage, mb, "forward"), from: recvB, to: backward, ...tag });
    const sendB = get("SEND_B", stage, mb);
    if (sendB !== undefined) out.push({ program: p, name: `s${stage} mb ${mb} input gradient`, kind: "comm", bytes: costs.boundaryBytes(stage, mb, "backward"), from: backward, fromLayer: costs.sendLayer(stage, "backward"), to: sendB, ...tag });
  }
  for (const l of extra) if (l.program === p) out.push(l);
  return out;
}
