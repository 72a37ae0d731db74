// Token files as GPT training code writes them (`data = tokens("train.bin", dtype: u16)`): a flat array of
// little-endian uint16 or uint32 token ids. Each row of a batch is a window of S + 1 consecutive tokens —
// tokens = the first S, targets = the last S — taken from the file's non-overlapping windows in an order
// shuffled by the seed, a fresh permutation every epoch. Windows are read from the file as needed (streamed,
// never the whole file in memory). Everything that can be checked is checked when the loader opens: the file,
// its size, that it holds at least one window, that the model is a token model, and that the first batch's
// ids fit the model's vocabulary (a u32 file read as u16, or a file for another tokenizer, fails there).
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { Graph, TensorId } from "../graph/graph.js";
import { isFloatDType } from "../graph/types.js";
import { epochOrder } from "./shuffle.js";
import type { Batch } from "../interp/session.js";
import { DataError } from "./data-error.js";
import { rowsOf, type RowSlice } from "./rows.js";

export { DataError };

export interface TokenOptions {
  readonly batch: number;
  readonly seq: number;
  readonly seed: number;
}

export interface TokenData {
  readonly description: string;
  /** Windows in the file; a batch takes `batch` of them. */
  readonly windows: number;
  /** Step `step`'s batch, or only `rows` of it (a data-parallel rank's share). */
  batch(step: number, rows?: RowSlice): Batch;
  close(): void;
}

const WIDTH = { u16: 2, u32: 4 } as const;

/** The model's token and target inputs (two integer inputs [B, S]) and the vocabulary its embedding has. */
function tokenInputs(g: Graph): { tokens: TensorId; targets: TensorId; vocab: number | undefined } {
  const inputs = g.inputs().map((t) => g.tensor(t));
  const ints = inputs.filter((t) => !isFloatDType(t.type.dtype));
  const describe = inputs.map((t) => `${t.name}: ${t.type.dtype}[${t.type.shape.length} dims]`).join(", ");
  if (ints.length !== 2 || ints.length !== inputs.length) {
    throw new DataError(`token data feeds models with two integer inputs (tokens, targets); model ${g.model} has ${describe || "no inputs"}`);
  }
  const tokens = ints.find((t) => t.name === "tokens") ?? ints[0]!;
  const targets = ints.find((t) => t !== tokens)!;
  const embedding = g.ops().find((o) => o.op === "embedding" && o.inputs[0] === tokens.id);
  const vocab = embedding ? (g.tensor(embedding.inputs[1]!).type.shape[0]?.coef ?? undefined) : undefined;
  return { tokens: tokens.id, targets: targets.id, vocab };
}

export function tokenData(g: Graph, path: string, dtype: "u16" | "u32", options: TokenOptions): TokenData {
  const { tokens, targets, vocab } = tokenInputs(g);
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new DataError(`cannot open token file ${path}: ${(e as Error).message}`);
  }
  const width = WIDTH[dtype];
  const size = fstatSync(fd).size;
  if (size % width !== 0) {
    closeSync(fd);
    throw new DataError(`token file ${path} has ${size} bytes, not a whole number of ${dtype} tokens (${width} bytes each): is the dtype right?`);
  }
  const count = size / width;
  const { batch: rows, seq } = options;
  const windows = Math.floor((count - 1) / seq);
  if (windows < 1) {
    closeSync(fd);
    throw new DataError(`token file ${path} has ${count} tokens, fewer than one sequence of ${seq} + 1`);
  }
  const order = epochOrder(options.seed, windows, "tokens");
  const buffer = Buffer.alloc((seq + 1) * width);
  const read = (window: number): Int32Array => {
    const offset = window * seq * width;
    const got = readSync(fd, buffer, 0, buffer.length, offset);
    if (got !== buffer.length) throw new DataError(`token file ${path}: short read at byte ${offset} (the file changed while training?)`);
    const out = new Int32Array(seq + 1);
    for (let i = 0; i <= seq; i++) out[i] = width === 2 ? buffer.readUInt16LE(2 * i) : buffer.readUInt32LE(4 * i);
    return out;
  };
  const data: TokenData = {
    description: `${count.toLocaleString("en-US")} ${dtype} tokens from ${path} (${windows.toLocaleString("en-US")} windows of ${seq} + 1, shuffled by seed ${options.seed})`,
    windows,
    batch(step: number, slice?: RowSlice): Batch {
      const { from, count } = rowsOf(rows, slice);
      const t = new Int32Array(count * seq);
      const y = new Int32Array(count * seq);
      for (let r = 0; r < count; r++) {
        const i = step * rows + from + r;
        const window = order(i);
        const w = read(window);
        if (vocab !== undefined) {
          for (let k = 0; k <= seq; k++) {
            if (w[k]! >= vocab) {
              throw new DataError(`token file ${path}: token ${w[k]} at index ${window * seq + k} is outside the model's vocabulary of ${vocab} (a u32 file read as u16, or a file made by another tokenizer?)`);
            }
          }
        }
        t.set(w.subarray(0, seq), r * seq);
        y.set(w.subarray(1), r * seq);
      }
      return { [g.tensor(tokens).name]: { shape: [count, seq], data: t }, [g.tensor(targets).name]: { shape: [count, seq], data: y } } as Batch;
    },
    close: () => closeSync(fd),
  };
  try {
    data.batch(0); // every check that needs the data itself, before training starts
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  return data;
}
