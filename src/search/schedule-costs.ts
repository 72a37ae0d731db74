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
  // A stage whose comm stream is the slower one (per-micro-batch collectives) runs at the comm stream's pace.
  // The excess goes into its backward, where the backward gathers and gradient reduce-scatters wait: not
  // into a recompute, which may run early in a bubble and would hide communication that cannot hide.
  const excess = bounds.map(([i, j], k) => Math.max(0, model.stageTime(k, i, j) - model.computeTime(k, i, j)));
  const backward = (k: number): number => model.backwardSeconds(...span(k)) + extra[k]! + excess[k]!;
  return {
    forward: (k) => model.forwardSeconds(...span(k)),
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
