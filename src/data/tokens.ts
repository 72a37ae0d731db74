// Token files as GPT training code writes them (`data = tokens("train.bin", dtype: u16)`): a flat array of
// little-endian uint16 or uint32 token ids. Each row of a batch is a window of S + 1 consecutive tokens —
// tokens = the first S, targets = the last S — taken from the file's non-overlapping windows in an order
// shuffled by the seed, a fresh permutation every epoch. Windows are read from the file as needed (streamed,
// never the whole file in memory). Everything that can be checked is checked when the loader opens: the file,
// its size, that it holds at least one window, that the model is a token model, and that every id in the file
// fits the model's vocabulary (a u32 file read as u16, or a file for another tokenizer, fails there, before
// the first step rather than when the bad id's batch comes; one streamed pass over the file).
import { closeSync, fstatSync, readSync } from "node:fs";
import type { Graph, TensorId } from "../graph/graph.js";
import { isFloatDType } from "../graph/types.js";
import type { Batch } from "../interp/session.js";
import { DataError } from "./data-error.js";
import { openChecked, openFile, readFully } from "./file.js";
import type { RowSlice } from "./rows.js";
import { batchOrder } from "./shuffle.js";
import { vocabOf } from "./vocab.js";

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

const ARRAY = { u16: Uint16Array, u32: Uint32Array } as const;

/** Tokens read per chunk by the vocabulary scan: 1 Mi ids, a few MB, so any file is scanned in bounded memory. */
const SCAN_CHUNK = 1 << 20;

/** The first id in the file at or beyond `vocab`, with its index, streamed chunk by chunk; undefined when none.
 *  A check, not training data: its reads are not counted in dataBytesRead (each process's own rows). */
function firstOutOfVocab(fd: number, dtype: "u16" | "u32", total: number, vocab: number): { index: number; id: number } | undefined {
  const chunk = new ARRAY[dtype](Math.min(SCAN_CHUNK, total));
  const width = chunk.BYTES_PER_ELEMENT;
  for (let start = 0; start < total; start += chunk.length) {
    const n = Math.min(chunk.length, total - start);
    if (readSync(fd, chunk, 0, n * width, start * width) !== n * width) return undefined; // shorter than its size: the batch reads report it
    for (let k = 0; k < n; k++) if (chunk[k]! >= vocab) return { index: start + k, id: chunk[k]! };
  }
  return undefined;
}

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
  return { tokens: tokens.id, targets: targets.id, vocab: vocabOf(g, tokens.id) };
}

export function tokenData(g: Graph, path: string, dtype: "u16" | "u32", options: TokenOptions): TokenData {
  const { tokens, targets, vocab } = tokenInputs(g);
  const [tokensName, targetsName] = [g.tensor(tokens).name, g.tensor(targets).name];
  const fd = openFile(path, `cannot open token file ${path}`);
  return openChecked(() => closeSync(fd), () => {
    const width = ARRAY[dtype].BYTES_PER_ELEMENT;
    const size = fstatSync(fd).size;
    if (size % width !== 0) throw new DataError(`token file ${path} has ${size} bytes, not a whole number of ${dtype} tokens (${width} bytes each): is the dtype right?`);
    const total = size / width;
    const { batch: rows, seq } = options;
    const windows = Math.floor((total - 1) / seq);
    if (windows < 1) throw new DataError(`token file ${path} has ${total} tokens, fewer than one sequence of ${seq} + 1`);
    if (vocab !== undefined) {
      const bad = firstOutOfVocab(fd, dtype, total, vocab);
      if (bad) throw new DataError(`token file ${path}: token ${bad.id} at index ${bad.index} is outside the model's vocabulary of ${vocab} (a u32 file read as u16, or a file made by another tokenizer?)`);
    }
    const order = batchOrder(options.seed, windows, "tokens", rows);
    // One window's S + 1 ids, as the file has them, reused for every read.
    const window = new ARRAY[dtype](seq + 1);
    const read = (w: number): void => {
      const offset = w * seq * width;
      if (!readFully(fd, window, offset)) throw new DataError(`token file ${path}: short read at byte ${offset} (the file changed while training?)`);
      if (vocab === undefined) return;
      for (let k = 0; k <= seq; k++) {
        if (window[k]! >= vocab) {
          throw new DataError(`token file ${path}: token ${window[k]} at index ${w * seq + k} is outside the model's vocabulary of ${vocab} (a u32 file read as u16, or a file made by another tokenizer?)`);
        }
      }
    };
    return {
      description: `${total.toLocaleString("en-US")} ${dtype} tokens from ${path} (${windows.toLocaleString("en-US")} windows of ${seq} + 1, shuffled by seed ${options.seed})`,
      windows,
      batch(step: number, slice?: RowSlice): Batch {
        const ws = order(step, slice);
        const t = new Int32Array(ws.length * seq);
        const y = new Int32Array(ws.length * seq);
        ws.forEach((w, r) => {
          read(w);
          t.set(window.subarray(0, seq), r * seq);
          y.set(window.subarray(1), r * seq);
        });
        return { [tokensName]: { shape: [ws.length, seq], data: t }, [targetsName]: { shape: [ws.length, seq], data: y } };
      },
      close: () => closeSync(fd),
    };
  });
}
