// The graph IR: ops, model inputs and parameters connected by tensors, grouped into layers. The only module
// that touches @dagrejs/graphlib; every pass reads and builds graphs through this class's API.
//
// A training graph (built by the autodiff pass) is the forward graph plus ops of three more phases, in one
// topological op list a runtime can execute in order:
//   - forward:     the model as written (every op of a graph the checker builds);
//   - backward:    input gradients, from the loss seed d(loss)/d(loss) = 1 back to every tensor that depends
//                  on a parameter (the critical path of a pipeline's backward);
//   - weight_grad: parameter gradients, split off so zero-bubble schedules can defer them; they read
//                  backward outputs and saved forward tensors, and no backward op reads them;
//   - optimizer:   gradient clipping and the update of every parameter and its optimizer state.
// Each backward/weight_grad op links to the forward op it differentiates (`forwardOp`); `paramGrads()` maps
// each parameter to its (accumulated) gradient tensor.
//
// Updates: optimizer state (momentum buffers, Adam moments, the step counter) is a leaf tensor of kind
// `state`, like a parameter. An update op reads a parameter or state leaf and outputs its new value as a
// tensor of kind `update`; `updates()` maps leaf → new value. After a step the new value replaces the leaf
// for the next step. The verifier checks that no op after an update op reads the old leaf, so a runtime
// may write each new value straight into the leaf's buffer and run the op list in place.
import { alg, Graph as GraphLib } from "@dagrejs/graphlib";
import { numel } from "./dim.js";
import type { ParamSpec } from "./op-def.js";
import type { Attrs, TensorType } from "./types.js";

export type TensorId = number;
export type OpId = number;

export const PHASES = ["forward", "backward", "weight_grad", "optimizer"] as const;
export type Phase = (typeof PHASES)[number];

/** Leaves (never produced by an op): `input` (model inputs), `param`, `state` (optimizer state). Produced:
 *  `activation` (forward values and optimizer intermediates such as the gradient norm), `grad` (outputs of
 *  backward and weight_grad ops), `update` (a parameter's or state's value for the next step). */
export type TensorKind = "input" | "param" | "state" | "activation" | "grad" | "update";
export type LeafKind = "input" | "param" | "state";

export function isLeafKind(k: TensorKind): k is LeafKind {
  return k === "input" || k === "param" || k === "state";
}

export interface TensorInfo {
  readonly id: TensorId;
  readonly type: TensorType;
  readonly kind: TensorKind;
  readonly name: string;
  readonly producer?: OpId;
}

/** Optimizer state: one leaf tensor, zero-initialized, owned by a parameter (the step counter by none). */
export interface StateInfo {
  readonly name: string;
  readonly tensor: TensorId;
  readonly type: TensorType;
  readonly role: "momentum" | "exp_avg" | "exp_avg_sq" | "step";
  /** Canonical name of the parameter it belongs to; absent for the shared step counter. */
  readonly param?: string;
}

/** How one tensor-parallel rank's parameter is cut from the whole (the tensor-parallel pass records it):
 *  along `axis` the whole dimension is `blocks` laid end to end (one block for most weights; the query, key
 *  and value heads of attention's packed projection), and rank k holds the k-th of `parts` equal slices of
 *  every block, in block order. */
export interface ParamSplit {
  readonly axis: number;
  readonly parts: number;
  readonly blocks: readonly number[];
}

export interface ParamInfo {
  readonly name: string;
  readonly tensor: TensorId;
  readonly type: TensorType;
  readonly init: ParamSpec["init"];
  readonly layer: number;
  readonly scope: string;
  /** Other names that resolve to this parameter (tied weights: `lm_head.weight` for `wte.weight`). */
  readonly aliases: readonly string[];
  /** A tensor-parallel rank's slice of the whole parameter; absent: the rank holds it whole. */
  readonly split?: ParamSplit;
}

export interface OpNode {
  readonly id: OpId;
  readonly op: string;
  readonly attrs: Attrs;
  /** Tensor operands in order. For module ops: the op's tensor inputs, then its parameters in the order of
   *  the registry's `params()` (a tied parameter takes the place of the one it replaces). */
  readonly inputs: readonly TensorId[];
  readonly outputs: readonly TensorId[];
  /** Hierarchical path of the member or block that emitted it, e.g. `layers.1.mlp.fc`. */
  readonly scope: string;
  readonly layer: number;
  readonly phase: Phase;
  /** backward and weight_grad ops: the forward op whose gradient they compute (or accumulate). */
  readonly forwardOp?: OpId;
}

export interface LayerAnnotations {
  readonly stage?: number;
  readonly checkpoint?: boolean;
  readonly fsdpUnit?: boolean;
}

export interface LayerInfo {
  readonly index: number;
  readonly name: string;
  /** Every op of the layer, all phases, in op order (backward ops sit in their forward op's layer). */
  readonly ops: readonly OpId[];
  readonly params: readonly string[];
  readonly annotations: LayerAnnotations;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
interface ParamRecord extends Omit<ParamInfo, "aliases" | "layer"> {
  layer: number;
  readonly aliases: string[];
}
interface LayerRecord extends Omit<LayerInfo, "ops" | "params"> {
  readonly ops: OpId[];
  readonly params: string[];
}

/** graphlib edge label: which tensor flows, into which operand slot of the consumer. */
type EdgeLabel = { readonly tensor: TensorId; readonly slot: number };

// Node keys: `t<id>` for the pseudo-node of an input, parameter or state tensor, `o<id>` for an op. An activation has
// no node of its own: its edges leave the op that produces it.
const tensorNode = (t: TensorId): string => `t${t}`;
const opNode = (o: OpId): string => `o${o}`;

function internal(message: string): never {
  throw new Error(`internal: ${message}`);
}

export class Graph {
  readonly model: string;
  private readonly tensorList: TensorInfo[] = [];
  /** Per tensor: the ops reading it, once per operand slot (so x·x lists its op twice); undefined until the
   *  first. Made by its first reader as a one-element list: an empty list's first push gives it room for 17,
   *  and most tensors have one or two readers (a deep model's training graph: 260k tensors, their lists
   *  were the largest part of what building it allocated). */
  private readonly readers: (OpId[] | undefined)[] = [];
  /** Per op: the tensors created for it by addOp (their `producer`), which is what the edges follow. */
  private readonly produced: TensorId[][] = [];
  /** The graphlib multigraph, built on first use and dropped on every change (see lib()). */
  private libCache: GraphLib | undefined;
  private readonly opList: Mutable<OpNode>[] = [];
  private readonly paramList: ParamRecord[] = [];
  private readonly paramByName = new Map<string, ParamRecord>();
  /** alias → canonical parameter name. */
  private readonly aliasOf = new Map<string, string>();
  private readonly layerList: LayerRecord[] = [];
  private readonly inputList: TensorId[] = [];
  private lossTensor: TensorId | undefined;
  private readonly stateList: StateInfo[] = [];
  private readonly stateByName = new Map<string, StateInfo>();
  /** canonical parameter name → gradient tensor. */
  private readonly gradOf = new Map<string, TensorId>();
  /** leaf (param or state) → its value after the step. */
  private readonly updateOf = new Map<TensorId, TensorId>();
  /** Whether unsafePatchOp has rewired an op: until then every op comes after its operands' producers (addOp
   *  takes only existing tensors), so that needs no scan. */
  private patched = false;

  constructor(model: string) {
    this.model = model;
  }

  // ---- building ----------------------------------------------------------------------------------------

  addLayer(name: string, annotations: LayerAnnotations = {}): number {
    const index = this.layerList.length;
    this.layerList.push({ index, name, ops: [], params: [], annotations });
    return index;
  }

  addInput(name: string, type: TensorType): TensorId {
    const id = this.newTensor({ type, kind: "input", name });
    this.inputList.push(id);
    return id;
  }

  addParam(p: { name: string; type: TensorType; init: ParamSpec["init"]; layer: number; scope: string; split?: ParamSplit }): TensorId {
    if (this.paramByName.has(p.name) || this.aliasOf.has(p.name)) internal(`parameter '${p.name}' is defined twice`);
    const layer = this.layerRecord(p.layer);
    const tensor = this.newTensor({ type: p.type, kind: "param", name: p.name });
    const rec: ParamRecord = { name: p.name, tensor, type: p.type, init: p.init, layer: p.layer, scope: p.scope, aliases: [], ...(p.split && { split: p.split }) };
    this.paramList.push(rec);
    this.paramByName.set(p.name, rec);
    layer.params.push(p.name);
    return tensor;
  }

  aliasParam(alias: string, target: string): void {
    if (this.paramByName.has(alias) || this.aliasOf.has(alias)) internal(`parameter '${alias}' is defined twice`);
    const canonical = this.paramByName.has(target) ? target : this.aliasOf.get(target);
    if (canonical === undefined) internal(`alias '${alias}' targets unknown parameter '${target}'`);
    this.aliasOf.set(alias, canonical);
    this.paramByName.get(canonical)!.aliases.push(alias);
  }

  /** Adds an op (phase "forward" unless given). Its outputs are `activation` tensors for forward and
   *  optimizer ops and `grad` tensors for backward and weight_grad ops, unless `outputKind` says otherwise. */
  addOp(o: {
    op: string;
    attrs: Attrs;
    inputs: readonly TensorId[];
    outputTypes: readonly TensorType[];
    scope: string;
    layer: number;
    name?: string;
    phase?: Phase;
    forwardOp?: OpId;
    outputKind?: "activation" | "grad" | "update";
  }): TensorId[] {
    const layer = this.layerRecord(o.layer);
    for (const t of o.inputs) if (!this.hasTensor(t)) internal(`op '${o.op}' uses unknown tensor %${t}`);
    const phase = o.phase ?? "forward";
    if (o.forwardOp !== undefined && !(o.forwardOp >= 0 && o.forwardOp < this.opList.length)) {
      internal(`op '${o.op}' links to unknown forward op ${o.forwardOp}`);
    }
    const kind = o.outputKind ?? (phase === "backward" || phase === "weight_grad" ? "grad" : "activation");
    const id = this.opList.length;
    const outputs = o.outputTypes.map((type, i) => {
      const name = o.name === undefined ? undefined : o.outputTypes.length === 1 ? o.name : `${o.name}.${i}`;
      return this.newTensor({ type, kind, name, producer: id });
    });
    const rec: Mutable<OpNode> = { id, op: o.op, attrs: o.attrs, inputs: [...o.inputs], outputs, scope: o.scope, layer: o.layer, phase };
    if (o.forwardOp !== undefined) rec.forwardOp = o.forwardOp;
    this.opList.push(rec);
    this.produced.push(outputs);
    layer.ops.push(id);
    for (const t of o.inputs) {
      const list = this.readers[t];
      if (list === undefined) this.readers[t] = [id];
      else list.push(id);
    }
    this.libCache = undefined;
    return outputs;
  }

  setLoss(t: TensorId): void {
    if (!this.hasTensor(t)) internal(`loss is unknown tensor %${t}`);
    this.lossTensor = t;
  }

  get loss(): TensorId | undefined {
    return this.lossTensor;
  }

  /** Adds a zero-initialized optimizer-state leaf. */
  addState(s: { name: string; type: TensorType; role: StateInfo["role"]; param?: string }): TensorId {
    if (this.stateByName.has(s.name)) internal(`state '${s.name}' is defined twice`);
    if (s.param !== undefined && !this.paramByName.has(s.param)) internal(`state '${s.name}' belongs to unknown parameter '${s.param}'`);
    const tensor = this.newTensor({ type: s.type, kind: "state", name: s.name });
    const info: StateInfo = s.param === undefined
      ? { name: s.name, tensor, type: s.type, role: s.role }
      : { name: s.name, tensor, type: s.type, role: s.role, param: s.param };
    this.stateList.push(info);
    this.stateByName.set(s.name, info);
    return tensor;
  }

  /** Records the gradient tensor of a parameter (by name or alias). */
  setParamGrad(param: string, t: TensorId): void {
    const p = this.param(param) ?? internal(`gradient for unknown parameter '${param}'`);
    if (!this.hasTensor(t)) internal(`gradient of '${param}' is unknown tensor %${t}`);
    this.gradOf.set(p.name, t);
  }

  /** Records that `value` replaces leaf `target` (a parameter or state tensor) after the step. */
  setUpdate(target: TensorId, value: TensorId): void {
    const k = this.tensor(target).kind;
    if (k !== "param" && k !== "state") internal(`update target %${target} is a ${k}, not a parameter or state`);
    if (this.updateOf.has(target)) internal(`%${target} is updated twice`);
    if (this.tensor(value).kind !== "update") internal(`update value %${value} is not an update tensor`);
    this.updateOf.set(target, value);
  }

  // ---- queries ------------------------------------------------------------------------------------------

  inputs(): readonly TensorId[] {
    return this.inputList;
  }

  hasTensor(id: TensorId): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.tensorList.length;
  }

  tensor(id: TensorId): TensorInfo {
    return this.tensorList[id] ?? internal(`unknown tensor %${id}`);
  }

  /** Every tensor (inputs, parameters, activations), by id. */
  tensors(): readonly TensorInfo[] {
    return this.tensorList;
  }

  op(id: OpId): OpNode {
    return this.opList[id] ?? internal(`unknown op ${id}`);
  }

  /** Insertion order, which is a topological order for graphs built with addOp. */
  ops(): readonly OpNode[] {
    return this.opList;
  }

  /** Declaration order. */
  params(): readonly ParamInfo[] {
    return this.paramList;
  }

  param(nameOrAlias: string): ParamInfo | undefined {
    return this.paramByName.get(this.aliasOf.get(nameOrAlias) ?? nameOrAlias);
  }

  /** Every alias with the name it resolves to, in the order they were declared. */
  aliases(): ReadonlyMap<string, string> {
    return this.aliasOf;
  }

  layers(): readonly LayerInfo[] {
    return this.layerList;
  }

  /** Optimizer state leaves, in creation order. */
  states(): readonly StateInfo[] {
    return this.stateList;
  }

  state(name: string): StateInfo | undefined {
    return this.stateByName.get(name);
  }

  /** canonical parameter name → gradient tensor, in the order they were recorded. */
  paramGrads(): ReadonlyMap<string, TensorId> {
    return this.gradOf;
  }

  paramGrad(nameOrAlias: string): TensorId | undefined {
    const p = this.param(nameOrAlias);
    return p === undefined ? undefined : this.gradOf.get(p.name);
  }

  /** leaf (parameter or state) → the tensor holding its value for the next step. */
  updates(): ReadonlyMap<TensorId, TensorId> {
    return this.updateOf;
  }

  /** True once the graph has any op beyond the forward phase. */
  isTraining(): boolean {
    return this.opList.some((o) => o.phase !== "forward");
  }

  /** A deep copy: passes that extend a graph clone it first, so their input stays untouched. */
  clone(): Graph {
    const g = new Graph(this.model);
    // Element by element: spreading a list into push() passes it as arguments, which overflows the stack
    // past ~10^5 entries (a model of 100,000 layers).
    for (const t of this.tensorList) g.tensorList.push(t);
    for (const r of this.readers) g.readers.push(r && [...r]);
    // Op records are copied (unsafePatchOp assigns to them); their operand and output lists, and the lists
    // of what each op produced, are never changed in place once made: shared.
    for (const p of this.produced) g.produced.push(p);
    for (const o of this.opList) g.opList.push({ ...o });
    for (const p of this.paramList) {
      const rec: ParamRecord = { ...p, aliases: [...p.aliases] };
      g.paramList.push(rec);
      g.paramByName.set(rec.name, rec);
    }
    for (const [a, t] of this.aliasOf) g.aliasOf.set(a, t);
    for (const l of this.layerList) g.layerList.push({ ...l, ops: [...l.ops], params: [...l.params] });
    for (const t of this.inputList) g.inputList.push(t);
    g.lossTensor = this.lossTensor;
    g.patched = this.patched;
    for (const s of this.stateList) {
      g.stateList.push(s);
      g.stateByName.set(s.name, s);
    }
    for (const [p, t] of this.gradOf) g.gradOf.set(p, t);
    for (const [a, b] of this.updateOf) g.updateOf.set(a, b);
    return g;
  }

  /** Ops that read tensor t, ascending and without repeats (an op reading t twice is listed once). */
  consumers(t: TensorId): readonly OpId[] {
    this.tensor(t);
    const list = this.readers[t];
    if (list === undefined) return [];
    // addOp appends in id order, so the list is already sorted; only repeats need removing.
    return list.filter((op, i) => i === 0 || op !== list[i - 1]);
  }

  /** Total elements over all parameters; a tied parameter counts once (aliases own no storage). */
  /** Elements of the parameters this graph holds (a tensor-parallel rank's graph: its slices). */
  parameterCount(): number {
    let n = 0;
    for (const p of this.paramList) n += numel(p.type.shape);
    return n;
  }

  /** Elements of the model's parameters: a split parameter counted whole (split.parts times its slice). */
  modelParameterCount(): number {
    let n = 0;
    for (const p of this.paramList) n += numel(p.type.shape) * (p.split?.parts ?? 1);
    return n;
  }

  /** Ops in a deterministic topological order: Kahn's algorithm, always taking the smallest ready id, so a
   *  graph built with addOp comes back in insertion order. Throws on a cycle (verifyGraph reports it). */
  topoOrder(): OpId[] {
    if (this.producersFirst()) return this.opList.map((o) => o.id);
    const order = this.kahn();
    if (order.length !== this.opList.length) internal(`graph '${this.model}' has a cycle`);
    return order;
  }

  isAcyclic(): boolean {
    return this.producersFirst() || this.kahn().length === this.opList.length;
  }

  /** The ops on each cycle (strongly connected components with an edge inside), for verifyGraph's message;
   *  empty for any graph built with addOp alone. */
  findCycles(): OpId[][] {
    return alg
      .findCycles(this.lib())
      .map((c) => c.filter((k) => k[0] === "o").map((k) => Number(k.slice(1))).sort((a, b) => a - b))
      .sort((a, b) => a[0]! - b[0]!);
  }

  // ---- unsafe, for verifyGraph's tests only --------------------------------------------------------------

  /** UNSAFE: overwrites fields of an op record with no checks (rewiring its input edges), so tests can build
   *  the broken graphs that addOp refuses to make. Layer lists are left as they were. Not for passes. */
  unsafePatchOp(id: OpId, patch: Partial<Pick<OpNode, "op" | "attrs" | "inputs" | "outputs" | "layer">>): void {
    const rec = this.opList[id] ?? internal(`unknown op ${id}`);
    if (patch.inputs) {
      for (const t of rec.inputs) {
        const list = this.readers[t];
        if (list) this.readers[t] = list.filter((o) => o !== id);
      }
      for (const t of patch.inputs) {
        if (!this.hasTensor(t)) continue;
        const list = (this.readers[t] ??= []);
        list.push(id);
        list.sort((a, b) => a - b);
      }
    }
    Object.assign(rec, patch);
    this.patched = true;
    this.libCache = undefined;
  }

  /** UNSAFE: moves a parameter record to another layer index without updating any layer list. Tests only. */
  unsafePatchParam(name: string, patch: { layer: number }): void {
    const rec = this.paramByName.get(name) ?? internal(`unknown parameter '${name}'`);
    rec.layer = patch.layer;
  }

  /** UNSAFE: records an alias without checking its target. Tests only. */
  unsafeAddAlias(alias: string, target: string): void {
    this.aliasOf.set(alias, target);
  }

  // ---- internals ----------------------------------------------------------------------------------------

  private newTensor(t: Omit<TensorInfo, "id" | "name"> & { name: string | undefined }): TensorId {
    const id = this.tensorList.length;
    const info: TensorInfo = t.producer === undefined
      ? { id, type: t.type, kind: t.kind, name: t.name ?? `%${id}` }
      : { id, type: t.type, kind: t.kind, name: t.name ?? `%${id}`, producer: t.producer };
    this.tensorList.push(info);
    this.readers.push(undefined);
    return id;
  }

  private layerRecord(index: number): LayerRecord {
    return this.layerList[index] ?? internal(`layer ${index} does not exist (graph has ${this.layerList.length})`);
  }

  /** The producer of tensor t as an edge source: its op, else its own pseudo-node (input or parameter). */
  private source(t: TensorId): string {
    const p = this.tensorList[t]!.producer;
    return p === undefined ? tensorNode(t) : opNode(p);
  }

  /**
   * The graph as a graphlib multigraph: a node per op, a pseudo-node per input and parameter, one edge per
   * operand slot (so a tensor read twice by one op is two edges). It is built on demand rather than kept in
   * step with addOp because graphlib's per-edge bookkeeping costs more than the whole rest of a build
   * (about 0.7–1 s for 40,000 ops), and only whole-graph algorithms need it.
   */
  private lib(): GraphLib {
    if (this.libCache) return this.libCache;
    const g = new GraphLib({ directed: true, multigraph: true });
    for (const t of this.inputList) g.setNode(tensorNode(t));
    for (const p of this.paramList) g.setNode(tensorNode(p.tensor));
    for (const s of this.stateList) g.setNode(tensorNode(s.tensor));
    for (const o of this.opList) {
      const node = opNode(o.id);
      g.setNode(node);
      o.inputs.forEach((t, slot) => {
        // An operand naming no tensor (possible only through unsafePatchOp) gets no edge; verifyGraph reports it.
        if (this.tensorList[t]) g.setEdge(this.source(t), node, { tensor: t, slot } satisfies EdgeLabel, String(slot));
      });
    }
    this.libCache = g;
    return g;
  }

  /** Whether every op comes after the producers of its operands, as addOp makes them: then the op list is
   *  the topological order Kahn's algorithm would give (the smallest op not yet taken is always ready),
   *  found without its heap (a deep model's training graph has hundreds of thousands of ops). */
  private producersFirst(): boolean {
    // Checked and compiled graphs are built by addOp alone: the checker asks for the order of a deep model
    // several times, and the scan chased every operand's producer (100,000 layers: 1.5 s).
    if (!this.patched) return true;
    for (const o of this.opList) {
      for (const t of o.inputs) {
        const p = this.tensorList[t]?.producer;
        if (p !== undefined && !(p < o.id)) return false;
      }
    }
    return true;
  }

  /** Kahn's algorithm over operand edges, always taking the smallest ready op id. Returns fewer ops than the
   *  graph has when there is a cycle. */
  private kahn(): OpId[] {
    const n = this.opList.length;
    const indegree = new Array<number>(n).fill(0);
    for (const o of this.opList) {
      for (const t of o.inputs) if (this.tensorList[t]?.producer !== undefined) indegree[o.id]!++;
    }
    const ready = new MinHeap();
    for (let i = 0; i < n; i++) if (indegree[i] === 0) ready.push(i);
    const order: OpId[] = [];
    while (ready.size > 0) {
      const i = ready.pop();
      order.push(i);
      for (const t of this.produced[i]!) {
        for (const w of this.readers[t] ?? []) if (--indegree[w]! === 0) ready.push(w);
      }
    }
    return order;
  }
}

/** Binary min-heap of op ids: Kahn's ready set, so the topological order does not depend on edge order. */
class MinHeap {
  private readonly a: number[] = [];
  get size(): number {
    return this.a.length;
  }
  push(x: number): void {
    const a = this.a;
    let i = a.push(x) - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (a[p]! <= x) break;
      a[i] = a[p]!;
      i = p;
    }
    a[i] = x;
  }
  pop(): number {
    const a = this.a;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= a.length) break;
        const c = l + 1 < a.length && a[l + 1]! < a[l]! ? l + 1 : l;
        if (a[c]! >= last) break;
        a[i] = a[c]!;
        i = c;
      }
      a[i] = last;
    }
    return top;
  }
}
