// A JSON-able summary of a graph (`fsm graph --json`, the cost model's inputs): parameter and op counts per
// layer, inputs, parameters with their shapes, and how many ops of each kind.
import { dimToString, numel } from "./dim.js";
import type { Graph, LayerAnnotations } from "./graph.js";
import { layerParameterCounts } from "./print.js";
import type { DType } from "./types.js";
import { typeToString } from "./types-format.js";

export interface GraphSummary {
  readonly model: string;
  /** Total parameter elements, tied parameters counted once. */
  readonly parameters: number;
  /** Number of distinct parameter tensors (aliases excluded). */
  readonly parameterTensors: number;
  /** Number of op nodes. */
  readonly ops: number;
  readonly layers: readonly {
    readonly index: number;
    readonly name: string;
    readonly parameters: number;
    readonly ops: number;
    readonly annotations: LayerAnnotations;
  }[];
  readonly inputs: readonly { readonly name: string; readonly type: string }[];
  readonly params: readonly {
    readonly name: string;
    readonly shape: readonly string[];
    readonly dtype: DType;
    readonly numel: number;
    readonly layer: number;
    readonly aliases: readonly string[];
  }[];
  /** Op name → count, keys sorted. */
  readonly opCounts: Readonly<Record<string, number>>;
}

export function graphSummary(g: Graph): GraphSummary {
  const counts = layerParameterCounts(g);
  const byOp = new Map<string, number>();
  for (const o of g.ops()) byOp.set(o.op, (byOp.get(o.op) ?? 0) + 1);
  const opCounts: Record<string, number> = {};
  for (const k of [...byOp.keys()].sort()) opCounts[k] = byOp.get(k)!;
  return {
    model: g.model,
    parameters: g.parameterCount(),
    parameterTensors: g.params().length,
    ops: g.ops().length,
    layers: g.layers().map((l) => ({
      index: l.index,
      name: l.name,
      parameters: counts[l.index]!,
      ops: l.ops.length,
      annotations: { ...l.annotations },
    })),
    inputs: g.inputs().map((t) => ({ name: g.tensor(t).name, type: typeToString(g.tensor(t).type) })),
    params: g.params().map((p) => ({
      name: p.name,
      shape: p.type.shape.map(dimToString),
      dtype: p.type.dtype,
      numel: numel(p.type.shape),
      layer: p.layer,
      aliases: [...p.aliases],
    })),
    opCounts,
  };
}
