// The search's stage model as ScheduleCosts, so the kept candidates run through the same pipeline simulator
// (src/schedule) that validates every plan: bubbles of uneven stages, transfers on their own streams.
import { stageBounds } from "./partition.js";
import { collectiveTime } from "../cost/collectives.js";
import type { ScheduleCosts } from "../schedule/costs.js";
import type { StageModel } from "./stage-model.js";

export function scheduleCostsFor(model: StageModel, sizes: readonly number[]): ScheduleCosts {
  const bounds = stageBounds(sizes);
  const span = (k: number): [number, number] => bounds[k]!;
  // Selective recompute runs inside the backward of the layers chosen.
  const extra = bounds.map(([i, j], k) => model.recompute(k, i, j)?.seconds ?? 0);
  // A stage whose comm stream (per-micro-batch collectives and pipeline transfers, one after another) is the
  // slower one runs at the comm stream's pace. The simulator runs the transfers on their own stream, so the
  // backward takes the rest: the comm stream's time beyond the compute's, less what the transfers alone
  // already hold it to. It goes into the backward, where the backward gathers and gradient reduce-scatters
  // wait: not into a recompute, which may run early in a bubble and would hide communication that cannot
  // hide. (Charging the transfers there too counted them twice: mlp's 2-stage plan on CPUs simulated at
  // 1.43× its compiled step.)
  const excess = bounds.map(([i, j], k) => {
    const compute = model.computeTime(k, i, j);
    const collectives = model.collectiveSeconds(k, i, j);
    const transfers = model.cutTransferSeconds(k, j);
    return Math.max(0, collectives + transfers - compute) - Math.max(0, transfers - compute);
  });
  // FSDP's gathers that wait behind a stage's pipeline receives (StageModel.exposedForwardGather).
  const backward = (k: number): number => model.backwardSeconds(...span(k)) + model.exposedBackwardGather(k, ...span(k)) + extra[k]! + excess[k]!;
  return {
    forward: (k) => model.forwardSeconds(...span(k)) + model.exposedForwardGather(k, ...span(k)),
    backward,
    backwardInput: (k) => backward(k) - model.weightSeconds(...span(k)),
    backwardWeight: (k) => model.weightSeconds(...span(k)),
    recompute: (k) => model.recomputeSeconds(...span(k)),
    boundaryBytes: (k, _mb, direction) => (direction === "forward" ? model.cutBytes(span(k)[1]) : k > 0 ? model.cutBytes(span(k)[0]) : 0),
    transfer: (from, _to, bytes) => collectiveTime("send_recv", bytes, 2, model.p2pLink(from)),
    activationBytes: (k) => model.keptPerMicroBatch(k, ...span(k)),
    inputBytes: (k) => model.stageInputBytes(...span(k)),
    weightGradBytes: (k) => model.weightGradBytes(...span(k)),
  };
}
