// What the plan search knows about each layer of a training graph, computed once per graph: parameters each
// layer reads, which layers are structurally identical (so a micro-batch size is costed once per kind of
// layer, not once per layer: gpt3-175b's 96 blocks are one kind), what each tensor the backward keeps weighs,
// and what crosses each possible cut. `at(b)` turns that into seconds and bytes for micro-batch size b.
//
// Activation bytes of a stage holding layers [i, j) (what stage-costs.ts computes for a fixed split) are
//   input(i, j) + Σ size(t) over tensors t produced in [i, j) and saved by a layer in [i, j)
// and a tensor produced in layer q whose first saver is layer s ≥ q counts exactly when i ≤ q and s < j, so
// every interval's bytes come from one (L+1)² table of sums instead of a walk over the graph per interval.
import type { Precision } from "../check/settings-types.js";
import type { Cluster } from "../cost/cluster.js";
import { estimateOp } from "../cost/graph-cost.js";
import { onDevice, opScratch, weightGradientBytes } from "../cost/precision.js";
import type { Graph, OpId, TensorId } from "../graph/graph.js";
import { layerKinds } from "../graph/layer-kinds.js";
import type { DimBindings } from "../graph/op-cost.js";
import { bytesOf } from "../graph/ops/cost-rules.js";
import { savedByLayer } from "../passes/autodiff.js";
import { firstGradientWrites, firstWriteByGroup, gradientOwners } from "../passes/gradient-writes.js";
import { BackwardWalk } from "../passes/backward-gradients.js";
import { ForwardWalk } from "../passes/forward-working-set.js";
import { numel } from "../graph/dim.js";
import { sequenceSymbol } from "../graph/sequence.js";
import { groupUnits } from "../shard/fsdp-units.js";
import { DEFAULT_FSDP_MIN_PARAMS } from "../shard/plan.js";

/** A tensor the backward keeps: producer layer q, first layer s that saves it. */
interface KeptTensor {
  readonly tensor: TensorId;
  readonly q: number;
  readonly s: number;
}

/** Seconds of every layer for one micro-batch of size b: all a candidate's lower bound needs. */
export interface MicroBatchTimes {
  readonly b: number;
  readonly forward: Float64Array;
  readonly backwardInput: Float64Array;
  readonly backwardWeight: Float64Array;
  /** Forward + backward FLOPs per layer (no recompute). */
  readonly flops: Float64Array;
}

/** Seconds and bytes of every layer for one micro-batch of size b. */
export interface MicroBatchProfile extends MicroBatchTimes {
  /** Bytes crossing cut c (between layers c − 1 and c), c = 0..L (0 and L carry nothing). */
  readonly cut: Float64Array;
  /** Bytes a checkpointed (recomputed) layer stops keeping. */
  readonly reducible: Float64Array;
  /** Bytes a layer saves when it is not checkpointed: the workspace its recompute rebuilds. */
  readonly saved: Float64Array;
  /** Bytes the layer's weight-gradient ops still read once its input gradients are done (what a deferred W
   *  keeps under zero-bubble schedules): layer inputs and output gradients of its weighted ops. */
  readonly weightGrad: Float64Array;
  /** The most bytes a compute action holds beyond the stash while it runs one of layers [i, j), i < j, in
   *  O(1): a layer's backward activation gradients or its forward's working set, each with its op scratch
   *  (walked once over the whole model: what compile's stage walk gives, a stage's incoming gradient counted
   *  as well). `staged` adds each weight-gradient op's own f32 buffer (replicated and optimizer-sharded stages). */
  readonly workingIn: (i: number, j: number, staged: boolean) => number;
  /** Stash bytes of layers [i, j) (i < j) beyond the stage input. */
  readonly keptIn: (i: number, j: number) => number;
  /** Model inputs: bytes and the first and last layer that reads each (every stage reading one is fed it). */
  readonly inputs: readonly { readonly bytes: number; readonly lo: number; readonly hi: number }[];
}

export class LayerTable {
  readonly count: number;
  readonly names: readonly string[];
  /** Parameters each layer's forward reads (a tied weight counts in each layer that reads it). */
  readonly params: readonly number[];
  /** Tied weights read by several layers: held once by a stage that holds several of those layers, filed
   *  under `owner` (its declaring layer when that reads it, else its first reader: stage-params.ts). */
  readonly shared: readonly { readonly layers: readonly number[]; readonly params: number; readonly owner: number }[];
  /** Layers of the same kind (identical ops, types and attributes) share a class. */
  readonly classOf: readonly number[];
  readonly pins: readonly (number | undefined)[];
  /** Per layer l: the first @stage-pinned layer at or after l (L when none). */
  private readonly nextPin: Int32Array;
  /** Per pinned layer p: the first pinned layer after p pinned to another stage (L when none). */
  private readonly pinRunEnd: Int32Array;
  /** @checkpoint layers: recomputed whatever the plan says. */
  readonly annotated: readonly boolean[];
  private readonly unitsCache = new Map<number, FsdpUnitTable>();
  private readonly forwardOps: readonly (readonly OpId[])[];
  private readonly representative: readonly number[];
  private readonly kept: readonly KeptTensor[];
  private readonly reducibleTensors: readonly (readonly TensorId[])[];
  private readonly savedTensors: readonly (readonly TensorId[])[];
  private readonly weightGradTensors: readonly (readonly TensorId[])[];
  private readonly crossing: readonly { readonly tensor: TensorId; readonly from: number; readonly to: number }[];
  private readonly modelInputs: readonly { readonly tensor: TensorId; readonly lo: number; readonly hi: number }[];
  private readonly timesCache = new Map<number, MicroBatchTimes>();
  private readonly cache = new Map<number, MicroBatchProfile>();
  private walked?: { readonly backward: BackwardWalk; readonly forward: ForwardWalk };

  constructor(
    private readonly training: Graph,
    private readonly cluster: Cluster,
    private readonly precision: Precision,
    private readonly seq: number | undefined,
  ) {
    const layers = training.layers();
    const L = layers.length;
    this.count = L;
    this.names = layers.map((l) => l.name);
    this.pins = layers.map((l) => l.annotations.stage);
    // For pinsAllow.
    this.nextPin = new Int32Array(L + 1).fill(L);
    this.pinRunEnd = new Int32Array(L + 1).fill(L);
    for (let l = L - 1; l >= 0; l--) {
      const pin = this.pins[l];
      const next = this.nextPin[l + 1]!;
      this.nextPin[l] = pin !== undefined ? l : next;
      if (pin !== undefined && next < L) this.pinRunEnd[l] = this.pins[next] !== pin ? next : this.pinRunEnd[next]!;
    }
    this.annotated = layers.map((l) => l.annotations.checkpoint === true);
    const forwardOps = layerKinds(training).forwardOps;
    const paramReaders = new Map<TensorId, Set<number>>();
    const firstRead = new Map<TensorId, number>();
    const lastRead = new Map<TensorId, number>();
    for (const o of training.ops()) {
      if (o.phase !== "forward") continue;
      for (const t of o.inputs) {
        const info = training.tensor(t);
        if (info.kind === "param") {
          if (!paramReaders.has(t)) paramReaders.set(t, new Set());
          paramReaders.get(t)!.add(o.layer);
        } else if (info.kind === "input" || info.kind === "activation") {
          if (!firstRead.has(t)) firstRead.set(t, o.layer);
          lastRead.set(t, Math.max(lastRead.get(t) ?? o.layer, o.layer));
        }
      }
    }
    this.forwardOps = forwardOps;
    const params = new Array<number>(L).fill(0);
    const shared: { layers: number[]; params: number; owner: number }[] = [];
    const declaredIn = new Map(training.params().map((p) => [p.tensor, p.layer]));
    for (const [t, readers] of paramReaders) {
      const n = numel(training.tensor(t).type.shape);
      for (const l of readers) params[l]! += n;
      if (readers.size > 1) {
        const layers = [...readers].sort((a, b) => a - b);
        const declared = declaredIn.get(t);
        shared.push({ layers, params: n, owner: declared !== undefined && readers.has(declared) ? declared : layers[0]! });
      }
    }
    this.params = params;
    this.shared = shared;

    // Layer kinds (layer-kinds.ts): each kind's ops are costed once.
    const kinds = layerKinds(training);
    this.classOf = kinds.kindOf;
    this.representative = kinds.representative;

    // Tensors the backward keeps, by producer and first saver; what checkpointing a layer frees.
    const saved = savedByLayer(training);
    const savers = new Map<TensorId, number[]>();
    saved.forEach((s, l) => {
      for (const t of s.saved) {
        if (!savers.has(t)) savers.set(t, []);
        savers.get(t)!.push(l);
      }
    });
    const kept: KeptTensor[] = [];
    const reducible = layers.map(() => [] as TensorId[]);
    for (const [t, by] of savers) {
      const info = training.tensor(t);
      if (info.kind !== "activation" || info.producer === undefined) continue;
      const q = training.op(info.producer).layer;
      kept.push({ tensor: t, q, s: Math.min(...by) });
      // Only its own layer keeps it and no later layer reads it: recomputing the layer frees it.
      if (by.length === 1 && by[0] === q && (lastRead.get(t) ?? q) === q) reducible[q]!.push(t);
    }
    this.kept = kept;
    this.reducibleTensors = reducible;
    this.savedTensors = saved.map((s) => s.saved.filter((t) => training.tensor(t).kind === "activation"));
    const wReads = layers.map(() => new Set<TensorId>());
    for (const o of training.ops()) {
      if (o.phase !== "weight_grad") continue;
      for (const t of o.inputs) {
        const k = training.tensor(t).kind;
        if (k !== "param" && k !== "state" && k !== "input") wReads[o.layer]!.add(t);
      }
    }
    this.weightGradTensors = wReads.map((w) => [...w]);
    const crossing: { tensor: TensorId; from: number; to: number }[] = [];
    const modelInputs: { tensor: TensorId; lo: number; hi: number }[] = [];
    for (const [t, last] of lastRead) {
      const info = training.tensor(t);
      if (info.kind === "input") modelInputs.push({ tensor: t, lo: firstRead.get(t)!, hi: last });
      else if (info.producer !== undefined) {
        const from = training.op(info.producer).layer;
        if (last > from) crossing.push({ tensor: t, from, to: last });
      }
    }
    this.crossing = crossing;
    this.modelInputs = modelInputs;
  }

  /** Parameters held by a stage of layers [i, j): tied weights once. */
  stageParams(prefix: Float64Array, i: number, j: number): number {
    let n = prefix[j]! - prefix[i]!;
    for (const s of this.shared) {
      let inside = 0;
      for (const l of s.layers) if (l >= i && l < j) inside++;
      if (inside > 1) n -= (inside - 1) * s.params;
    }
    return n;
  }

  /** The FSDP units compile wraps the layers into (src/shard/fsdp-units.ts groupUnits: @fsdp_unit layers, else
   *  consecutive layers until a unit holds `minParams` parameters, the rest in the root unit), over the whole
   *  model: compile groups each stage's layers apart, so a stage boundary inside a unit is priced as if the
   *  unit were whole (the model's collectives are its units', not its layers'). */
  fsdpUnits(minParams: number = DEFAULT_FSDP_MIN_PARAMS): FsdpUnitTable {
    let units = this.unitsCache.get(minParams);
    if (!units) {
      const grouping = groupUnits(this.training.layers(), this.params.map((numel, layer) => ({ layer, numel })), minParams);
      const groups = grouping.root.length > 0 ? [...grouping.inner, grouping.root] : grouping.inner;
      // A tied weight is a member of one unit only, the one of the layer it is filed under.
      const owned = [...this.params];
      for (const t of this.shared) for (const l of t.layers) if (l !== t.owner) owned[l]! -= t.params;
      const params = groups.map((ls) => ls.reduce((n, l) => n + owned[l]!, 0));
      // Each group's layers ascend.
      const lead = Int32Array.from(groups, (ls) => ls[0]!);
      // The root unit stays gathered all step (it never reshards): what is gathered and released in turn
      // is the inner units. (A loop, not a spread: a deep model has more units than a call takes arguments.)
      let maxParams = 0;
      for (let u = 0; u < grouping.inner.length; u++) maxParams = Math.max(maxParams, params[u]!);
      const rootOwned = new Array<number>(this.count).fill(0);
      for (const l of grouping.root) rootOwned[l] = owned[l]!;
      const rootPrefix = prefix(rootOwned);
      const unitOf = new Int32Array(this.count).fill(-1);
      groups.forEach((ls, u) => ls.forEach((l) => (unitOf[l] = u)));
      units = { params, lead, maxParams, rootPrefix, unitOf, inner: grouping.inner.length };
      this.unitsCache.set(minParams, units);
    }
    return units;
  }

  /** Whether every layer of [i, j) pinned by @stage is pinned to stage k (the partitioner asks it for every
   *  interval: O(1)). */
  pinsAllow(k: number, i: number, j: number): boolean {
    const first = this.nextPin[i]!;
    return first >= j || (this.pins[first] === k && this.pinRunEnd[first]! >= j);
  }

  /** The layers' seconds at micro-batch size b, without the bytes: the search bounds every candidate of the
   *  space with these, and only the few micro-batch sizes of candidates it evaluates need `at(b)` (gpt3-175b
   *  on 1,024 devices: 60 sizes bounded, 10 evaluated), whose byte tables walk the whole graph. */
  times(b: number): MicroBatchTimes {
    let t = this.timesCache.get(b);
    if (!t) {
      t = this.layerTimes(b);
      this.timesCache.set(b, t);
    }
    return t;
  }

  at(b: number): MicroBatchProfile {
    let p = this.cache.get(b);
    if (!p) {
      p = { ...this.times(b), ...this.layerBytes(b) };
      this.cache.set(b, p);
    }
    return p;
  }

  private bindings(b: number): DimBindings {
    return this.seq === undefined ? { B: b } : { B: b, S: sequenceSymbol(this.training, this.seq) };
  }

  private layerTimes(b: number): MicroBatchTimes {
    const L = this.count;
    const options = { cluster: this.cluster, precision: this.precision, bindings: this.bindings(b) };
    // One costing per kind of layer.
    const perClass = this.representative.map((rep) => {
      let f = 0;
      let back = 0;
      let fl = 0;
      let input = 0;
      let weight = 0;
      for (const id of this.forwardOps[rep]!) {
        const e = estimateOp(this.training, id, options);
        f += e.forwardSeconds;
        back += e.backwardSeconds;
        fl += e.cost.forwardFlops;
        input += e.cost.backwardFlops.input;
        weight += e.cost.backwardFlops.weight;
      }
      // Split the backward time between input and weight gradients by their FLOPs, as stage-costs.ts does.
      const share = input + weight > 0 ? weight / (input + weight) : 0;
      return { f, bi: back * (1 - share), bw: back * share, flops: fl + input + weight };
    });
    const forward = new Float64Array(L);
    const backwardInput = new Float64Array(L);
    const backwardWeight = new Float64Array(L);
    const flops = new Float64Array(L);
    for (let l = 0; l < L; l++) {
      const c = perClass[this.classOf[l]!]!;
      forward[l] = c.f;
      backwardInput[l] = c.bi + (this.annotated[l] ? c.f : 0);
      backwardWeight[l] = c.bw;
      flops[l] = c.flops;
    }
    return { b, forward, backwardInput, backwardWeight, flops };
  }

  /** Each tensor's bytes at micro-batch size b, found once (by tensor id, −1 until found): the sums and the
   *  working-set walks ask again. */
  private sizeAt(b: number): (t: TensorId) => number {
    let size = this.sizes.get(b);
    if (!size) {
      const bindings = this.bindings(b);
      const sizes = new Float64Array(this.training.tensors().length).fill(-1);
      size = (t: TensorId): number => {
        let n = sizes[t]!;
        if (n < 0) {
          n = bytesOf(onDevice(this.training.tensor(t).type, this.precision), bindings);
          sizes[t] = n;
        }
        return n;
      };
      this.sizes.set(b, size);
    }
    return size;
  }
  private readonly sizes = new Map<number, (t: TensorId) => number>();

  private layerBytes(b: number): Omit<MicroBatchProfile, keyof MicroBatchTimes> {
    const L = this.count;
    const bindings = this.bindings(b);
    const size = this.sizeAt(b);
    const cut = new Float64Array(L + 1);
    for (const x of this.crossing) {
      const n = size(x.tensor);
      for (let c = x.from + 1; c <= x.to; c++) cut[c]! += n;
    }
    const sum = (ts: readonly TensorId[]): number => ts.reduce((n, t) => n + size(t), 0);
    const reducible = Float64Array.from(this.reducibleTensors, sum);
    const saved = Float64Array.from(this.savedTensors, sum);
    const weightGrad = Float64Array.from(this.weightGradTensors, sum);
    // kept(i, j) = Σ size over kept tensors with q ≥ i and s < j (made and first saved inside [i, j))
    //            = Σ_{s<j} − Σ_{q<i} + Σ_{q<i, s≥j}: two prefix sums and the tensors spanning the interval,
    // which only tensors saved two or more layers after they are made can do (few). O(L) memory, not L².
    const keptBySaver = new Float64Array(L + 1);
    const keptByMaker = new Float64Array(L + 1);
    const keptSpans: KeptSpan[] = [];
    for (const k of this.kept) {
      // @checkpoint layers keep only their inputs: what they produce is not kept on their account.
      if (this.annotated[k.q] && k.s === k.q) continue;
      const n = size(k.tensor);
      keptBySaver[k.s + 1]! += n;
      keptByMaker[k.q + 1]! += n;
      if (k.s - k.q >= 2) keptSpans.push({ q: k.q, s: k.s, bytes: n });
    }
    for (let l = 0; l < L; l++) {
      keptBySaver[l + 1]! += keptBySaver[l]!;
      keptByMaker[l + 1]! += keptByMaker[l]!;
    }
    const keptIn = (i: number, j: number): number => {
      if (j <= i) return 0;
      let n = keptBySaver[j]! - keptByMaker[i]!;
      for (const x of keptSpans) if (x.q < i && x.s >= j) n += x.bytes;
      return n;
    };
    const inputs = this.modelInputs.map((x) => ({ bytes: size(x.tensor), lo: x.lo, hi: x.hi }));
    const { working, workingStaged } = this.workingSets(b, bindings, size);
    const plain = rangeMax(working);
    const stagedMax = rangeMax(workingStaged);
    const workingIn = (i: number, j: number, staged: boolean): number => (staged ? stagedMax(i, j) : plain(i, j));
    return { cut, reducible, saved, weightGrad, keptIn, inputs, workingIn };
  }

  /** What layer l's stash releases as its backward reads it for the last time (BackwardWalk's `released`). */
  private readonly released = (l: number): readonly TensorId[] => this.savedTensors[l]!;
  /** Per micro-batch size walked: each layer's forward working set, and the op scratch it was priced with. */
  private readonly forwardWorking = new Map<number, { readonly forward: Float64Array; readonly scratch: ReturnType<typeof opScratch> }>();

  /**
   * workingIn for FSDP stages whose units' gradients are made every backward (not no_sync), in O(1): each
   * layer's backward peak less the unit gradients it creates, as compile's memory plan prices them (a unit's
   * unsharded gradient from the start of the layer whose backward first writes it, its activation gradients
   * on top: stage-costs.ts). An output layer's logits gradient is freed before the head's weight gradient
   * exists, so the two are not summed: gpt2-124m's head makes a 785 MiB logits gradient and then its 394 MiB
   * unit gradient (micro-batch 8, bf16 logits, fp32 gradients), which compile holds at once as 394 + 392, where workingIn adds the whole
   * 785 to the units in flight. The units are fsdpUnits(minParams); `gradBytes` per parameter of a gradient.
   */
  fsdpWorkingIn(b: number, minParams: number, gradBytes: number): (i: number, j: number) => number {
    const key = `${b}|${minParams}|${gradBytes}`;
    let f = this.fsdpWorking.get(key);
    if (!f) {
      this.at(b);
      const { forward, scratch } = this.forwardWorking.get(b)!;
      const appears = this.unitGradientWrites(minParams);
      const back = this.walks().backward.peaks(this.sizeAt(b), this.released, scratch, (op) => (appears.get(op) ?? 0) * gradBytes);
      const working = Float64Array.from(forward);
      for (const { layer, bytes } of back) working[layer] = Math.max(working[layer]!, bytes);
      f = rangeMax(working);
      this.fsdpWorking.set(key, f);
    }
    return f;
  }
  private readonly fsdpWorking = new Map<string, (i: number, j: number) => number>();

  /** Per op: the parameters of the FSDP units whose gradient it is the first to write in the backward's run
   *  order (layers descending), over the whole model (compile finds them per stage: gradient-writes.ts). */
  private unitGradientWrites(minParams: number): ReadonlyMap<OpId, number> {
    let at = this.unitWrites.get(minParams);
    if (!at) {
      const g = this.training;
      const units = this.fsdpUnits(minParams);
      // A tied weight is in the unit of the layer it is filed under.
      const unitOf = (param: string): number | undefined => {
        const u = units.unitOf[g.param(param)!.layer]!;
        return u >= 0 ? u : undefined;
      };
      const made = new Map<OpId, number>();
      for (const [u, w] of firstWriteByGroup(firstGradientWrites(g, 0, this.count, gradientOwners(g)), unitOf)) made.set(w.op, (made.get(w.op) ?? 0) + units.params[u]!);
      this.unitWrites.set(minParams, made);
      at = made;
    }
    return at;
  }
  private readonly unitWrites = new Map<number, ReadonlyMap<OpId, number>>();

  /** The whole model's backward and forward (the stash held) walked once for every micro-batch size. */
  private walks(): { readonly backward: BackwardWalk; readonly forward: ForwardWalk } {
    if (!this.walked) {
      const held = new Set<TensorId>();
      for (const ts of this.savedTensors) for (const t of ts) held.add(t);
      this.walked = { backward: new BackwardWalk(this.training, 0, this.count), forward: new ForwardWalk(this.training, 0, this.count, held) };
    }
    return this.walked;
  }

  /** The working sets of compile's stage walks (stage-costs.ts), over the whole model at once. */
  private workingSets(b: number, bindings: DimBindings, size: (t: TensorId) => number): { working: Float64Array; workingStaged: Float64Array } {
    const g = this.training;
    const L = this.count;
    const scratch = opScratch(this.cluster.profile, g, this.precision, bindings);
    const partial = weightGradientBytes(g, bindings);
    const walks = this.walks();
    const { plain: back, withExtra: backStaged } = walks.backward.peakPair(size, this.released, scratch, partial);
    const fwd = walks.forward.peaks(size, scratch);
    const working = new Float64Array(L);
    const workingStaged = new Float64Array(L);
    for (const { layer, bytes } of fwd) {
      working[layer] = bytes;
      workingStaged[layer] = bytes;
    }
    this.forwardWorking.set(b, { forward: Float64Array.from(working), scratch });
    for (const { layer, bytes } of back) working[layer] = Math.max(working[layer]!, bytes);
    for (const { layer, bytes } of backStaged) workingStaged[layer] = Math.max(workingStaged[layer]!, bytes);
    return { working, workingStaged };
  }
}

/** FSDP units over a model's layers: each one's parameters and its lowest layer (where its gradient
 *  completes, and the layer its collectives are priced at), the root unit last. */
export interface FsdpUnitTable {
  readonly params: readonly number[];
  readonly lead: Int32Array;
  /** The most parameters gathered and released as one: the largest inner unit (0 when all are the root). */
  readonly maxParams: number;
  /** Prefix sums over the layers of the root unit's parameters (a tied weight only in its owner's layer). */
  readonly rootPrefix: Float64Array;
  /** Per layer: the unit it belongs to (-1: it holds no parameters); units from `inner` on are the root. */
  readonly unitOf: Int32Array;
  readonly inner: number;
}

interface KeptSpan {
  readonly q: number;
  readonly s: number;
  readonly bytes: number;
}

/** Prefix sums: out[k] = Σ values[0..k). */
export function prefix(values: ArrayLike<number>): Float64Array {
  const out = new Float64Array(values.length + 1);
  for (let i = 0; i < values.length; i++) out[i + 1] = out[i]! + values[i]!;
  return out;
}

/** Range maxima over [i, j) in O(1) after O(n log n) (a sparse table): the partitioner asks every interval. */
function rangeMax(values: Float64Array): (i: number, j: number) => number {
  const levels: Float64Array[] = [values];
  for (let w = 1; 2 * w <= values.length; w *= 2) {
    const prev = levels[levels.length - 1]!;
    const next = new Float64Array(values.length - 2 * w + 1);
    for (let i = 0; i < next.length; i++) next[i] = Math.max(prev[i]!, prev[i + w]!);
    levels.push(next);
  }
  return (i, j) => {
    if (j <= i) return 0;
    const k = 31 - Math.clz32(j - i);
    const row = levels[k]!;
    return Math.max(row[i]!, row[j - (1 << k)]!);
  };
}
