// Executes graph ops one after another on concrete tensors: binds the symbolic dims, evaluates each op's
// output shapes, calls its kernel and checks what comes back.
import { evalDim, SYMBOLIC_DIMS, type Shape, type SymbolName } from "../graph/dim.js";
import type { Graph, OpNode, TensorId } from "../graph/graph.js";
import type { DimBindings } from "../graph/op-cost.js";
import { isFloatDType } from "../graph/types.js";
import { kernelFor } from "./kernels/index.js";
import type { Kernel, KernelContext } from "./kernels/kernel.js";
import { sizeOf, type FloatKind, type Tensor } from "./tensor.js";

export interface RunOptions {
  /** Values of B and S for this run. */
  readonly bindings: DimBindings;
  readonly float: FloatKind;
  /** Where each op's kernel comes from (default: the interpreter's). */
  readonly kernels?: (op: string) => Kernel;
}

export function concreteShape(shape: Shape, bindings: DimBindings): number[] {
  return shape.map((d) => evalDim(d, bindings));
}

/**
 * B and S from the batch: each input dim that is exactly one symbol (B or S) takes the size the batch has
 * there. Throws when a symbol is never pinned down or two inputs disagree.
 */
export function bindDims(g: Graph, batch: Readonly<Record<string, Tensor>>): DimBindings {
  const out: Partial<Record<SymbolName, number>> = {};
  for (const t of g.inputs()) {
    const info = g.tensor(t);
    const value = batch[info.name];
    if (!value) throw new Error(`the batch has no value for input '${info.name}'`);
    if (value.shape.length !== info.type.shape.length) throw new Error(`input '${info.name}' has rank ${value.shape.length}, expected ${info.type.shape.length}`);
    info.type.shape.forEach((d, i) => {
      const syms = SYMBOLIC_DIMS.filter((s) => d.syms[s]);
      if (syms.length !== 1 || d.syms[syms[0]!] !== 1) return;
      // c·S: a sequence-parallel rank's graph reads the whole sequence, c times its own part S.
      const s = syms[0]!;
      const n = value.shape[i]!;
      if (n % d.coef !== 0) throw new Error(`input '${info.name}': ${n} along dimension ${i} is not a multiple of ${d.coef}`);
      const prev = out[s];
      if (prev !== undefined && prev !== n / d.coef) throw new Error(`inputs disagree on ${s}: ${prev} and ${n / d.coef}`);
      out[s] = n / d.coef;
    });
  }
  return out;
}

/** Runs `ops` in order, reading operands from `values` and storing every output there. */
export function runOps(g: Graph, ops: Iterable<OpNode>, values: Map<TensorId, Tensor>, opts: RunOptions): void {
  for (const o of ops) {
    const inputs = operandValues(g, o, values);
    const ctx = kernelContext(g, o, opts);
    storeOutputs(g, o, (opts.kernels ?? kernelFor)(o.op)(inputs, o.attrs, ctx), values, ctx);
  }
}

export function operandValues(g: Graph, o: OpNode, values: ReadonlyMap<TensorId, Tensor>): Tensor[] {
  return o.inputs.map((t) => values.get(t) ?? missing(g, t, o));
}

/** What a kernel is told of op o's outputs at the run's values of B and S. */
export function kernelContext(g: Graph, o: OpNode, opts: RunOptions): KernelContext {
  const outShapes = o.outputs.map((t) => concreteShape(g.tensor(t).type.shape, opts.bindings));
  const outInt = o.outputs.map((t) => !isFloatDType(g.tensor(t).type.dtype));
  return { outShapes, outInt, float: opts.float };
}

/** Checks a kernel's outputs against the graph's types and stores them as op o's output values. */
export function storeOutputs(g: Graph, o: OpNode, outs: readonly Tensor[], values: Map<TensorId, Tensor>, ctx: KernelContext): void {
  if (outs.length !== o.outputs.length) throw new Error(`internal: kernel ${o.op} returned ${outs.length} outputs, expected ${o.outputs.length}`);
  outs.forEach((v, i) => {
    const t = o.outputs[i]!;
    const want = ctx.outShapes[i]!;
    if (v.shape.length !== want.length || v.shape.some((d, k) => d !== want[k]) || v.data.length !== sizeOf(want)) {
      throw new Error(`internal: kernel ${o.op} (op ${o.id}) output ${i} has shape [${v.shape}], expected [${want}]`);
    }
    if (isFloatDType(g.tensor(t).type.dtype) === v.data instanceof Int32Array) throw new Error(`internal: kernel ${o.op} output ${i} has the wrong element type`);
    values.set(t, v);
  });
}

function missing(g: Graph, t: TensorId, o: OpNode): never {
  throw new Error(`no value for ${g.tensor(t).kind} ${g.tensor(t).name} (%${t}), operand of op ${o.id} (${o.op})`);
}
