// What a stage's forward holds while it runs beyond what it keeps: each forward value lives from the op that
// makes it to the last forward op of the stage that reads it, and a runtime that frees a value after its
// last read holds at once only the values still to be read (the residual stream between two layers, a
// layer's inputs while its output is made). The stash is priced as such (kept for the backward), and so are
// the values the stage sends on (pipeline send buffers): what is left is the forward's working set, which
// with checkpointing — nothing kept but the stage input — is a whole layer's internals.
import type { Graph, TensorId } from "../graph/graph.js";
import { walkOps, type OpWalk } from "./op-walk.js";

/** A stage's forward walked once (layers ascending, each layer's forward ops in graph order), the tensors in
 *  `held` left out (priced elsewhere: the stash, the sends), to be priced at any micro-batch size. */
export class ForwardWalk {
  private readonly walk: OpWalk;

  constructor(
    g: Graph,
    private readonly start: number,
    private readonly end: number,
    held: ReadonlySet<TensorId>,
  ) {
    const layerOrder = Array.from({ length: end - start }, (_, i) => start + i);
    this.walk = walkOps(g, layerOrder, (o) => o.phase === "forward", (_, t) => !held.has(t));
  }

  /**
   * Per layer of [start, end), in forward order: the most bytes of forward values live at once while that
   * layer's forward ops run, not counting the held tensors. An op's outputs count while it runs even when
   * nothing reads them later. `scratch(op, dying)` is what an op adds while it runs (f32 twins of 16-bit
   * operands on a device whose kernels compute in f32); `dying(t)` says whether operand t, counted here, is
   * read for the last time by this op.
   */
  peaks(bytes: (t: TensorId) => number, scratch: (op: number, dying: (t: TensorId) => boolean) => number = () => 0): { layer: number; bytes: number }[] {
    const { start, end } = this;
    const { order, begins, madeTensors, madePositions, made, lastRead } = this.walk;
    const delta = new Float64Array(order.length + 1);
    for (let k = 0; k < madeTensors.length; k++) {
      const t = madeTensors[k]!;
      const from = madePositions[k]!;
      const to = Math.max(from, lastRead.get(t) ?? from);
      const b = bytes(t);
      delta[from]! += b;
      delta[to + 1]! -= b;
    }
    let at = 0;
    const dying = (t: TensorId): boolean => lastRead.get(t) === at && made.get(t) !== undefined;
    const peaks: { layer: number; bytes: number }[] = [];
    let live = 0;
    for (let k = 0, l = start; l < end; k++, l++) {
      let peak = 0;
      for (at = begins[k]!; at < begins[k + 1]!; at++) {
        live += delta[at]!;
        peak = Math.max(peak, live + scratch(order[at]!, dying));
      }
      peaks.push({ layer: l, bytes: peak });
    }
    return peaks;
  }
}

/** ForwardWalk's peaks for one stage (layers [start, end)) of a training graph. */
export function forwardWorkingPeaks(
  g: Graph,
  start: number,
  end: number,
  bytes: (t: TensorId) => number,
  held: ReadonlySet<TensorId>,
  scratch?: (op: number, dying: (t: TensorId) => boolean) => number,
): { layer: number; bytes: number }[] {
  return new ForwardWalk(g, start, end, held).peaks(bytes, scratch);
}
