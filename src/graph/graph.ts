// The graph IR: ops, model inputs and parameters connected by tensors, grouped into layers. The only module
// that touches @dagrejs/graphlib; every pass reads and builds graphs through this class's API.
import { alg, Graph as GraphLib } from "@dagrejs/graphlib";
import { numel } from "./dim.js";
import type { ParamSpec } from "./op-def.js";
import type { Attrs, TensorType } from "./types.js";

export type TensorId = number;
export type OpId = number;

export interface TensorInfo {
  readonly id: TensorId;
  readonly type: TensorType;
  readonly kind: "input" | "param" | "activation";
  readonly name: string;
  readonly producer?: OpId;
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
}

export interface LayerAnnotations {
  readonly stage?: number;
  readonly checkpoint?: boolean;
  readonly fsdpUnit?: boolean;
}

export interface LayerInfo {
  readonly index: number;
  readonly name: string;
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

// Node keys: `t<id>` for the pseudo-node of an input or parameter tensor, `o<id>` for an op. An activation has
// no node of its own: its edges leave the op that produces it.
const tensorNode = (t: TensorId): string => `t${t}`;
const opNode = (o: OpId): string => `o${o}`;

function internal(message: string): never {
  throw new Error(`internal: ${message}`);
}

export class Graph {
  readonly model: string;
  private readonly tensorList: TensorInfo[] = [];
  /** Per tensor: the ops reading it, once per operand slot (so x·x lists its op twice). */
  private readonly readers: OpId[][] = [];
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

  addParam(p: { name: string; type: TensorType; init: ParamSpec["init"]; layer: number; scope: string }): TensorId {
    if (this.paramByName.has(p.name) || this.aliasOf.has(p.name)) internal(`parameter '${p.name}' is defined twice`);
    const layer = this.layerRecord(p.layer);
    const tensor = this.newTensor({ type: p.type, kind: "param", name: p.name });
    const rec: ParamRecord = { name: p.name, tensor, type: p.type, init: p.init, layer: p.layer, scope: p.scope, aliases: [] };
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

  addOp(o: {
    op: string;
    attrs: Attrs;
    inputs: readonly TensorId[];
    outputTypes: readonly TensorType[];
    scope: string;
    layer: number;
    name?: string;
  }): TensorId[] {
    const layer = this.layerRecord(o.layer);
    for (const t of o.inputs) if (!this.hasTensor(t)) internal(`op '${o.op}' uses unknown tensor %${t}`);
    const id = this.opList.length;
    const outputs = o.outputTypes.map((type, i) => {
      const name = o.name === undefined ? undefined : o.outputTypes.length === 1 ? o.name : `${o.name}.${i}`;
      return this.newTensor({ type, kind: "activation", name, producer: id });
    });
    this.opList.push({ id, op: o.op, attrs: o.attrs, inputs: [...o.inputs], outputs, scope: o.scope, layer: o.layer });
    this.produced.push(outputs);
    layer.ops.push(id);
    for (const t of o.inputs) this.readers[t]!.push(id);
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

  /** Ops that read tensor t, ascending and without repeats (an op reading t twice is listed once). */
  consumers(t: TensorId): readonly OpId[] {
    this.tensor(t);
    const list = this.readers[t]!;
    // addOp appends in id order, so the list is already sorted; only repeats need removing.
    return list.filter((op, i) => i === 0 || op !== list[i - 1]);
  }

  /** Total elements over all parameters; a tied parameter counts once (aliases own no storage). */
  parameterCount(): number {
    let n = 0;
    for (const p of this.paramList) n += numel(p.type.shape);
    return n;
  }

  /** Ops in a deterministic topological order: Kahn's algorithm, always taking the smallest ready id, so a
   *  graph built with addOp comes back in insertion order. Throws on a cycle (verifyGraph reports it). */
  topoOrder(): OpId[] {
    const order = this.kahn();
    if (order.length !== this.opList.length) internal(`graph '${this.model}' has a cycle`);
    return order;
  }

  isAcyclic(): boolean {
    return this.kahn().length === this.opList.length;
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
        const list = this.readers[t];
        if (!list) continue;
        list.push(id);
        list.sort((a, b) => a - b);
      }
    }
    Object.assign(rec, patch);
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
    this.readers.push([]);
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
        for (const w of this.readers[t]!) if (--indegree[w]! === 0) ready.push(w);
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
