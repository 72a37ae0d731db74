// Synthetic, learnable training data for any sample (`data = synthetic()`), deterministic by seed and step:
// - token models (i32 inputs, e.g. tokens and targets): each row is a sequence x_{i+1} = (a·x_i + b) mod V
//   from a random start, tokens = x_0..x_{S-1} and targets = x_1..x_S, with a (coprime to V) and b fixed by
//   the seed: the next token is a function of the current one, which embeddings and an output layer learn;
// - float models (float inputs, e.g. x and y): x ~ N(0, 1) and every further input y = tanh(x·Wᵀ) for a fixed
//   random W ~ N(0, 1/d_in) per target: a smooth map an MLP can fit.
// Batch `step` always has the same content, and different steps differ.
import type { Graph, TensorId } from "../graph/graph.js";
import type { DimBindings } from "../graph/op-cost.js";
import { isFloatDType } from "../graph/types.js";
import { Rng, streamSeed } from "../interp/random.js";
import { concreteShape } from "../interp/run.js";
import type { Batch } from "../interp/session.js";
import { floatArray, sizeOf, type FloatKind, type Tensor } from "../interp/tensor.js";
import { vocabOf } from "./vocab.js";
import { sequenceSymbol } from "../graph/sequence.js";

export interface SyntheticOptions {
  readonly seed: number;
  /** Rows per batch: the value of B. */
  readonly batch: number;
  /** Sequence length: the value of S (token models). */
  readonly seq?: number;
  readonly float?: FloatKind;
}

export interface SyntheticData {
  /** One line saying what the task is, for logs. */
  readonly description: string;
  batch(step: number): Batch;
}

export function syntheticData(g: Graph, options: SyntheticOptions): SyntheticData {
  const inputs = g.inputs().map((t) => g.tensor(t));
  const bindings: DimBindings = options.seq === undefined ? { B: options.batch } : { B: options.batch, S: sequenceSymbol(g, options.seq) };
  const shapeOf = (t: TensorId): number[] => {
    const info = g.tensor(t);
    if (info.type.shape.some((d) => d.syms.S) && options.seq === undefined) throw new Error(`synthetic data for input '${info.name}' needs a sequence length`);
    return concreteShape(info.type.shape, bindings);
  };
  const ints = inputs.filter((t) => !isFloatDType(t.type.dtype));
  const floatsIn = inputs.filter((t) => isFloatDType(t.type.dtype));
  if (ints.length > 0 && floatsIn.length === 0) return tokenTask(g, options, ints.map((t) => t.id), shapeOf);
  if (floatsIn.length > 0 && ints.length === 0) return regressionTask(options, floatsIn.map((t) => ({ name: t.name, shape: shapeOf(t.id) })));
  throw new Error(`not implemented: synthetic data for a model with both integer and float inputs ('${g.model}')`);
}

function tokenTask(g: Graph, options: SyntheticOptions, ids: TensorId[], shapeOf: (t: TensorId) => number[]): SyntheticData {
  if (ids.length > 2) throw new Error(`not implemented: synthetic token data for more than two integer inputs ('${g.model}')`);
  const vocabs = ids.map((t) => vocabOf(g, t));
  if (vocabs.some((v) => v === undefined)) throw new Error(`not implemented: synthetic data for an i32 input that no embedding or cross_entropy reads ('${g.model}')`);
  const V = Math.min(...(vocabs as number[]));
  const shape = shapeOf(ids[0]!);
  if (ids.length === 2 && shapeOf(ids[1]!).join() !== shape.join()) throw new Error(`not implemented: synthetic tokens and targets of different shapes ('${g.model}')`);
  const task = new Rng(streamSeed(options.seed, "synthetic.tokens"));
  // a coprime to V makes the map a permutation, so sequences do not collapse into a few short cycles.
  let a = 1 + task.int(V - 1);
  while (gcd(a, V) !== 1) a = 1 + task.int(V - 1);
  const b = task.int(V);
  const S = shape.at(-1) ?? 1;
  const rows = sizeOf(shape) / S;
  // The targets are the i32 input a cross_entropy reads as its second operand; the other one is the tokens.
  const isTarget = (t: TensorId) => g.consumers(t).some((id) => g.op(id).op === "cross_entropy" && g.op(id).inputs[1] === t);
  const ordered = ids.length === 2 && isTarget(ids[0]!) && !isTarget(ids[1]!) ? [ids[1]!, ids[0]!] : ids;
  const names = ordered.map((t) => g.tensor(t).name);
  return {
    description: `next token = (${a}·token + ${b}) mod ${V}`,
    batch(step) {
      const rng = new Rng(streamSeed(options.seed, `synthetic.batch.${step}`));
      const tokens = new Int32Array(rows * S);
      const targets = new Int32Array(rows * S);
      for (let r = 0; r < rows; r++) {
        let x = rng.int(V);
        for (let i = 0; i < S; i++) {
          const next = (a * x + b) % V;
          tokens[r * S + i] = x;
          targets[r * S + i] = next;
          x = next;
        }
      }
      const out: Record<string, Tensor> = { [names[0]!]: { shape, data: tokens } };
      if (names[1] !== undefined) out[names[1]] = { shape, data: targets };
      return out;
    },
  };
}

function regressionTask(options: SyntheticOptions, inputs: { name: string; shape: number[] }[]): SyntheticData {
  const float = options.float ?? "f32";
  const [x, ...ys] = inputs as [{ name: string; shape: number[] }, ...{ name: string; shape: number[] }[]];
  const dIn = x.shape.at(-1) ?? 1;
  const rows = sizeOf(x.shape) / dIn;
  const task = new Rng(streamSeed(options.seed, "synthetic.regression"));
  const maps = ys.map((y) => {
    const dOut = y.shape.at(-1) ?? 1;
    if (sizeOf(y.shape) / dOut !== rows) throw new Error(`not implemented: synthetic target '${y.name}' with other leading dims than '${x.name}'`);
    const w = new Float64Array(dOut * dIn);
    for (let i = 0; i < w.length; i++) w[i] = task.normal() / Math.sqrt(dIn);
    return { ...y, dOut, w };
  });
  return {
    description: `${maps.map((m) => m.name).join(", ")} = tanh(W·${x.name}), ${x.name} ~ N(0, 1)`,
    batch(step) {
      const rng = new Rng(streamSeed(options.seed, `synthetic.batch.${step}`));
      const xs = floatArray(float, rows * dIn);
      for (let i = 0; i < xs.length; i++) xs[i] = rng.normal();
      const out: Record<string, Tensor> = { [x.name]: { shape: x.shape, data: xs } };
      for (const m of maps) {
        const ys = floatArray(float, rows * m.dOut);
        for (let r = 0; r < rows; r++) {
          for (let o = 0; o < m.dOut; o++) {
            let s = 0;
            for (let i = 0; i < dIn; i++) s += m.w[o * dIn + i]! * xs[r * dIn + i]!;
            ys[r * m.dOut + o] = Math.tanh(s);
          }
        }
        out[m.name] = { shape: m.shape, data: ys };
      }
      return out;
    },
  };
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}
