// `.npy` arrays as training data (`data = npy(x: "x.npy", y: "y.npy")`): one file per model input, rows along
// the first axis (the batch dimension), the rest of each row matching the input's shape. Every file is checked
// when the loader opens — NumPy's format header, a little-endian C-order dtype the input can take (f4/f8 for
// float inputs, i4/i8 for integer ones), the row shape, one row count for all files, at least a batch of rows
// — and rows are then read as needed (streamed), visited in a per-epoch order shuffled by the seed.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { Graph } from "../graph/graph.js";
import { isFloatDType } from "../graph/types.js";
import { concreteShape } from "../interp/run.js";
import type { Batch } from "../interp/session.js";
import { epochOrder } from "./shuffle.js";
import { DataError } from "./data-error.js";
import { rowsOf, type RowSlice } from "./rows.js";

const DTYPES = { "<f4": { bytes: 4, float: true }, "<f8": { bytes: 8, float: true }, "<i4": { bytes: 4, float: false }, "<i8": { bytes: 8, float: false } } as const;
type Descr = keyof typeof DTYPES;

export interface NpyHeader {
  readonly descr: Descr;
  readonly shape: readonly number[];
  /** Byte offset of the data. */
  readonly dataOffset: number;
}

/** Reads and checks a .npy header (format versions 1-3). */
export function readNpyHeader(fd: number, path: string): NpyHeader {
  const head = Buffer.alloc(12);
  readSync(fd, head, 0, 12, 0);
  if (head.toString("latin1", 0, 6) !== "\x93NUMPY") throw new DataError(`${path} is not a .npy file (no \\x93NUMPY magic)`);
  const major = head[6]!;
  if (major < 1 || major > 3) throw new DataError(`${path}: .npy format version ${major} is not supported (1-3 are)`);
  const lengthBytes = major === 1 ? 2 : 4;
  const headerLength = major === 1 ? head.readUInt16LE(8) : head.readUInt32LE(8);
  const start = 8 + lengthBytes;
  const text = Buffer.alloc(headerLength);
  if (readSync(fd, text, 0, headerLength, start) !== headerLength) throw new DataError(`${path}: truncated .npy header`);
  const header = text.toString(major === 3 ? "utf8" : "latin1");
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) throw new DataError(`${path}: malformed .npy header ${JSON.stringify(header.trim())}`);
  if (!(descr in DTYPES)) throw new DataError(`${path}: dtype '${descr}' is not supported (use little-endian float32/64 or int32/64: ${Object.keys(DTYPES).join(", ")})`);
  if (fortran === "True") throw new DataError(`${path}: Fortran-order arrays are not supported (save with np.ascontiguousarray)`);
  const shape = shapeText.split(",").map((x) => x.trim()).filter((x) => x !== "").map(Number);
  if (shape.length === 0 || shape.some((n) => !Number.isInteger(n) || n < 0)) throw new DataError(`${path}: shape (${shapeText}) needs a row axis`);
  return { descr: descr as Descr, shape, dataOffset: start + headerLength };
}

export interface NpyOptions {
  readonly batch: number;
  readonly seq?: number;
  readonly seed: number;
}

export function npyData(g: Graph, files: Readonly<Record<string, string>>, options: NpyOptions): { description: string; rows: number; batch(step: number, rows?: RowSlice): Batch; close(): void } {
  const inputs = g.inputs().map((t) => g.tensor(t));
  const names = inputs.map((t) => t.name);
  const extra = Object.keys(files).filter((n) => !names.includes(n));
  if (extra.length > 0) throw new DataError(`npy(...) names ${extra.join(", ")}, which model ${g.model} has no input called (its inputs: ${names.join(", ")})`);
  const missing = names.filter((n) => files[n] === undefined);
  if (missing.length > 0) throw new DataError(`npy(...) gives no file for input ${missing.join(", ")} of model ${g.model}`);
  const bindings = options.seq === undefined ? { B: 1 } : { B: 1, S: options.seq };
  const opened: { name: string; path: string; fd: number; header: NpyHeader; row: number[]; float: boolean; buffer: Buffer }[] = [];
  const close = (): void => opened.forEach((o) => closeSync(o.fd));
  try {
    for (const t of inputs) {
      const path = files[t.name]!;
      let fd: number;
      try {
        fd = openSync(path, "r");
      } catch (e) {
        throw new DataError(`cannot open .npy file ${path} for input '${t.name}': ${(e as Error).message}`);
      }
      let header: NpyHeader;
      try {
        header = readNpyHeader(fd, path);
      } catch (e) {
        closeSync(fd);
        throw e;
      }
      const row = concreteShape(t.type.shape, bindings).slice(1);
      // One row's bytes, reused for every read of this file.
      const entry = { name: t.name, path, fd, header, row, float: isFloatDType(t.type.dtype), buffer: Buffer.alloc(row.reduce((a, b) => a * b, 1) * DTYPES[header.descr].bytes) };
      opened.push(entry);
      const kind = DTYPES[header.descr];
      if (kind.float !== entry.float) throw new DataError(`${path}: dtype ${header.descr} for input '${t.name}', which is ${t.type.dtype} (use ${entry.float ? "<f4 or <f8" : "<i4 or <i8"})`);
      const rowShape = header.shape.slice(1);
      if (rowShape.length !== entry.row.length || rowShape.some((n, i) => n !== entry.row[i])) {
        throw new DataError(`${path}: rows of shape (${rowShape.join(", ")}) for input '${t.name}', which needs rows of shape (${entry.row.join(", ")})`);
      }
      const expected = header.dataOffset + header.shape.reduce((a, b) => a * b, 1) * kind.bytes;
      if (fstatSync(fd).size < expected) throw new DataError(`${path}: truncated (${fstatSync(fd).size} bytes, the header promises ${expected})`);
    }
    const rows = opened[0]!.header.shape[0]!;
    for (const o of opened) if (o.header.shape[0] !== rows) throw new DataError(`${o.path} has ${o.header.shape[0]} rows but ${opened[0]!.path} has ${rows}: every input needs one row per example`);
    if (rows < options.batch) throw new DataError(`${opened[0]!.path} has ${rows} rows, fewer than one batch of ${options.batch}`);
    const order = epochOrder(options.seed, rows, "npy");
    const readRow = (o: (typeof opened)[number], r: number, into: Float32Array | Int32Array, at: number): void => {
      const kind = DTYPES[o.header.descr];
      const n = o.row.reduce((a, b) => a * b, 1);
      const buf = o.buffer;
      const offset = o.header.dataOffset + r * n * kind.bytes;
      if (readSync(o.fd, buf, 0, buf.length, offset) !== buf.length) throw new DataError(`${o.path}: short read at byte ${offset}`);
      for (let k = 0; k < n; k++) {
        let v: number;
        if (o.header.descr === "<f4") v = buf.readFloatLE(4 * k);
        else if (o.header.descr === "<f8") v = buf.readDoubleLE(8 * k);
        else if (o.header.descr === "<i4") v = buf.readInt32LE(4 * k);
        else {
          const big = buf.readBigInt64LE(8 * k);
          if (big > 2147483647n || big < -2147483648n) throw new DataError(`${o.path}: value ${big} in row ${r} does not fit the int32 input '${o.name}'`);
          v = Number(big);
        }
        into[at + k] = v;
      }
    };
    const data = {
      description: `${rows.toLocaleString("en-US")} rows of ${opened.map((o) => `${o.name} ← ${o.path}`).join(", ")}, shuffled by seed ${options.seed}`,
      rows,
      batch(step: number, slice?: RowSlice): Batch {
        const { from, count } = rowsOf(options.batch, slice);
        const out: Record<string, Batch[string]> = {};
        for (const o of opened) {
          const n = o.row.reduce((a, b) => a * b, 1);
          const arr = o.float ? new Float32Array(count * n) : new Int32Array(count * n);
          for (let r = 0; r < count; r++) readRow(o, order(step * options.batch + from + r), arr, r * n);
          out[o.name] = { shape: [count, ...o.row], data: arr } as Batch[string];
        }
        return out;
      },
      close,
    };
    data.batch(0); // a read of every file before training starts
    return data;
  } catch (e) {
    close();
    throw e;
  }
}
