// The activation gradients a backward holds while it runs: each gradient op's output (kind `grad`, phase
// `backward`) lives from the op that makes it to the last gradient op that reads it. They are not model
// state and not the stash, but a backward's working set on top of both: the largest tensors of a layer
// (an MLP's [B, S, 4H] gradient) exist only here. What a runtime that frees each value after its last
// read holds at once, layer by layer, in the order a stage's backward runs (layers descending, each
// layer's gradient ops in graph order).
import type { Graph, TensorId } from "../graph/graph.js";
import { walkOps, type OpWalk } from "./op-walk.js";

/** A stage's backward walked once (its gradient ops in run order: layers descending, each layer's in graph
 *  order), to be priced at any micro-batch size: the search prices the whole model's at every size it tries. */
export class BackwardWalk {
  private readonly walk: OpWalk;

  /** `held`: activation gradients priced elsewhere and left out (a split backward's W inputs, held from the
   *  I segment that makes them to the end of W). */
  constructor(
    g: Graph,
    private readonly start: number,
    private readonly end: number,
    held?: ReadonlySet<TensorId>,
  ) {
    const layerOrder = Array.from({ length: end - start }, (_, i) => end - 1 - i);
    this.walk = walkOps(
      g,
      layerOrder,
      (o) => o.phase === "backward" || o.phase === "weight_grad",
      (o, t) => o.phase === "backward" && g.tensor(t).kind === "grad" && !held?.has(t),
    );
  }

  /**
   * Per layer of [start, end): the most activation-gradient tensors live at once while that layer's gradient
   * ops run (as tensor ids: the caller prices them for its micro-batch size). Parameter gradients (outputs of
   * weight_grad ops) are excluded: they land in the gradient buffers the plan prices as such; so is the
   * gradient the stage receives (it is a pipeline receive buffer) and the one it sends back (a send buffer):
   * a tensor read by no gradient op of the stage after it is made does not count. `released(l)` names the
   * tensors layer l's stash holds until the layer's backward ends (what the caller charges to the layer): the
   * ones whose last read is already past count against the peak, since a runtime has reused their bytes.
   * `scratch(op, dying)` is what an op adds while it runs to what is counted live (a runtime whose kernels
   * compute in f32 widens 16-bit operands into temporaries first); `dying(t)` says whether operand t, counted
   * live here, is read for the last time by this op. `appears(op)` is a buffer the caller prices from the
   * start of the op's layer, that really begins at that op (an FSDP unit's unsharded gradient, made by its
   * first weight-gradient op): the peak returned is then what the layer adds on top of it, so the two together
   * are the layer's most at once — a logits gradient freed before the unit gradient exists is not summed with it.
   * `sendsBack`: the stage sends its input gradient on, as such a buffer.
   */
  peaks(
    bytes: (t: TensorId) => number,
    released: (layer: number) => Iterable<TensorId> = () => [],
    scratch: (op: number, dying: (t: TensorId) => boolean) => number = () => 0,
    appears: (op: number) => number = () => 0,
    sendsBack = false,
  ): { layer: number; bytes: number }[] {
    return this.walkPeaks(bytes, released, scratch, appears, sendsBack, undefined).plain;
  }

  /** peaks() twice in one walk: with `scratch`, and with `scratch` plus `extra(op)` (the search prices a
   *  layer's working set both without and with a staged weight gradient; the walk is most of the cost). */
  peakPair(
    bytes: (t: TensorId) => number,
    released: (layer: number) => Iterable<TensorId>,
    scratch: (op: number, dying: (t: TensorId) => boolean) => number,
    extra: (op: number) => number,
  ): { plain: { layer: number; bytes: number }[]; withExtra: { layer: number; bytes: number }[] } {
    const { plain, withExtra } = this.walkPeaks(bytes, released, scratch, () => 0, false, extra);
    return { plain, withExtra: withExtra! };
  }

  private walkPeaks(
    bytes: (t: TensorId) => number,
    released: (layer: number) => Iterable<TensorId>,
    scratch: (op: number, dying: (t: TensorId) => boolean) => number,
    appears: (op: number) => number,
    sendsBack: boolean,
    extra: ((op: number) => number) | undefined,
  ): { plain: { layer: number; bytes: number }[]; withExtra: { layer: number; bytes: number }[] | undefined } {
    const { start, end } = this;
    const { order, begins, madeTensors, madePositions, made, lastRead } = this.walk;
    // Live bytes at each position: +size where made, −size after the last read (a value nobody reads after
    // its op is freed at once: it never coexists with a later op's outputs).
    const delta = new Float64Array(order.length + 1);
    const unread = new Float64Array(order.length);
    for (let k = 0; k < madeTensors.length; k++) {
      const t = madeTensors[k]!;
      const from = madePositions[k]!;
      const to = lastRead.get(t);
      // Read by no later op of the stage: the gradient it sends back, a send buffer the caller prices from
      // the start of the layer that makes it; it appears at its op.
      if (to === undefined && sendsBack) unread[from]! += bytes(t);
      if (to === undefined || to === from) continue;
      const b = bytes(t);
      delta[from]! += b;
      delta[to + 1]! -= b;
    }
    const peaks: { layer: number; bytes: number }[] = [];
    const extraPeaks: { layer: number; bytes: number }[] | undefined = extra && [];
    let live = 0;
    // One predicate for every op: it reads the walk's position and the current layer's stash.
    let at = 0;
    let stash = new Set<TensorId>();
    const dying = (t: TensorId): boolean => lastRead.get(t) === at && (made.get(t) !== undefined || stash.has(t));
    for (let k = 0, l = end - 1; l >= start; k++, l--) {
      // What this layer's stash (the caller prices it as held to the layer's end) has already given back by
      // each of its ops: a tensor after its last read. Subtracted, so stash + peak is what is live at most.
      const done: [number, number][] = [];
      stash = new Set(released(l));
      for (const t of stash) {
        const last = lastRead.get(t);
        if (last !== undefined) done.push([last, bytes(t)]);
      }
      done.sort((a, b) => a[0] - b[0]);
      let peak = 0;
      let extraPeak = 0;
      let freed = 0;
      let d = 0;
      let appeared = 0;
      for (at = begins[k]!; at < begins[k + 1]!; at++) {
        const op = order[at]!;
        live += delta[at]!;
        appeared += appears(op) + unread[at]!;
        while (d < done.length && done[d]![0] < at) freed += done[d++]![1];
        const here = live - freed + appeared + scratch(op, dying);
        peak = Math.max(peak, here);
        if (extra) extraPeak = Math.max(extraPeak, here + extra(op));
      }
      peaks.push({ layer: l, bytes: Math.max(0, peak - appeared) });
      extraPeaks?.push({ layer: l, bytes: Math.max(0, extraPeak - appeared) });
    }
    return { plain: peaks, withExtra: extraPeaks };
  }
}

/** BackwardWalk's peaks for one stage (layers [start, end)) of a training graph. */
export function backwardGradientPeaks(
  g: Graph,
  start: number,
  end: number,
  bytes: (t: TensorId) => number,
  released?: (layer: number) => Iterable<TensorId>,
  scratch?: (op: number, dying: (t: TensorId) => boolean) => number,
  appears?: (op: number) => number,
  sendsBack?: boolean,
): { layer: number; bytes: number }[] {
  return new BackwardWalk(g, start, end).peaks(bytes, released, scratch, appears, sendsBack);
}
