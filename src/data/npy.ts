// `.npy` arrays as training data (`data = npy(x: "x.npy", y: "y.npy")`): one file per model input, rows along
// the first axis (the batch dimension), the rest of each row matching the input's shape. Every file is checked
// when the loader opens — NumPy's format header, a little-endian C-order dtype the input can take (f4/f8 for
// float inputs, i4/i8 for integer ones), the row shape, one row count for all files, at least a batch of rows
// — and rows are then read as needed (streamed), visited in a per-epoch order shuffled by the seed.
import { closeSync, fstatSync, readSync } from "node:fs";
import type { Graph } from "../graph/graph.js";
import { isFloatDType } from "../graph/types.js";
import { concreteShape } from "../interp/run.js";
import type { Batch } from "../interp/session.js";
import { sizeOf } from "../interp/tensor.js";
import { DataError } from "./data-error.js";
import { openChecked, openFile, readFully } from "./file.js";
import type { RowSlice } from "./rows.js";
import { batchOrder } from "./shuffle.js";
import { sequenceSymbol } from "../graph/sequence.js";

const DTYPES = { "<f4": { bytes: 4, float: true }, "<f8": { bytes: 8, float: true }, "<i4": { bytes: 4, float: false }, "<i8": { bytes: 8, float: false } } as const;
type Descr = keyof typeof DTYPES;

interface NpyHeader {
  readonly descr: Descr;
  readonly shape: readonly number[];
  /** Byte offset of the data. */
  readonly dataOffset: number;
}

/** Reads and checks a .npy header (format versions 1-3). */
function readNpyHeader(fd: number, path: string): NpyHeader {
  const head = Buffer.alloc(12);
  readSync(fd, head, 0, 12, 0);
  if (head.toString("latin1", 0, 6) !== "\x93NUMPY") throw new DataError(`${path} is not a .npy file (no \\x93NUMPY magic)`);
  const major = head[6]!;
  if (major < 1 || major > 3) throw new DataError(`${path}: .npy format version ${major} is not supported (1-3 are)`);
  const lengthBytes = major === 1 ? 2 : 4;
  const headerLength = major === 1 ? head.readUInt16LE(8) : head.readUInt32LE(8);
  const start = 8 + lengthBytes;
  const text = Buffer.alloc(headerLength);
  if (!readFully(fd, text, start)) throw new DataError(`${path}: truncated .npy header`);
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

/** One input's file, checked against the input. */
interface Source {
  readonly name: string;
  readonly path: string;
  readonly fd: number;
  readonly header: NpyHeader;
  /** The shape of one row (the input's shape without B) and its element count. */
  readonly row: readonly number[];
  readonly size: number;
  readonly float: boolean;
  /** A row's bytes as the file has them, for the 8-byte dtypes (converted to the f32/i32 input); the 4-byte
   *  ones are the input's own and are read straight into the batch. */
  readonly wide: Float64Array | BigInt64Array | undefined;
}

export function npyData(g: Graph, files: Readonly<Record<string, string>>, options: NpyOptions): { description: string; rows: number; batch(step: number, rows?: RowSlice): Batch; close(): void } {
  const inputs = g.inputs().map((t) => g.tensor(t));
  const names = inputs.map((t) => t.name);
  const extra = Object.keys(files).filter((n) => !names.includes(n));
  if (extra.length > 0) throw new DataError(`npy(...) names ${extra.join(", ")}, which model ${g.model} has no input called (its inputs: ${names.join(", ")})`);
  const missing = names.filter((n) => files[n] === undefined);
  if (missing.length > 0) throw new DataError(`npy(...) gives no file for input ${missing.join(", ")} of model ${g.model}`);
  const bindings = options.seq === undefined ? { B: 1 } : { B: 1, S: sequenceSymbol(g, options.seq) };
  const fds: number[] = [];
  const close = (): void => fds.forEach((fd) => closeSync(fd));
  return openChecked(close, () => {
    const opened: Source[] = [];
    for (const t of inputs) {
      const path = files[t.name]!;
      const fd = openFile(path, `cannot open .npy file ${path} for input '${t.name}'`);
      fds.push(fd);
      const header = readNpyHeader(fd, path);
      const row = concreteShape(t.type.shape, bindings).slice(1);
      const kind = DTYPES[header.descr];
      const float = isFloatDType(t.type.dtype);
      if (kind.float !== float) throw new DataError(`${path}: dtype ${header.descr} for input '${t.name}', which is ${t.type.dtype} (use ${float ? "<f4 or <f8" : "<i4 or <i8"})`);
      const rowShape = header.shape.slice(1);
      if (rowShape.length !== row.length || rowShape.some((n, i) => n !== row[i])) {
        throw new DataError(`${path}: rows of shape (${rowShape.join(", ")}) for input '${t.name}', which needs rows of shape (${row.join(", ")})`);
      }
      const expected = header.dataOffset + sizeOf(header.shape) * kind.bytes;
      const bytes = fstatSync(fd).size;
      if (bytes < expected) throw new DataError(`${path}: truncated (${bytes} bytes, the header promises ${expected})`);
      const size = sizeOf(row);
      const wide = header.descr === "<f8" ? new Float64Array(size) : header.descr === "<i8" ? new BigInt64Array(size) : undefined;
      opened.push({ name: t.name, path, fd, header, row, size, float, wide });
    }
    const rows = opened[0]!.header.shape[0]!;
    for (const o of opened) if (o.header.shape[0] !== rows) throw new DataError(`${o.path} has ${o.header.shape[0]} rows but ${opened[0]!.path} has ${rows}: every input needs one row per example`);
    if (rows < options.batch) throw new DataError(`${opened[0]!.path} has ${rows} rows, fewer than one batch of ${options.batch}`);
    const order = batchOrder(options.seed, rows, "npy", options.batch);
    /** Row `r` of `o`'s file into `into` from element `at` on. */
    const readRow = (o: Source, r: number, into: Float32Array | Int32Array, at: number): void => {
      const bytes = o.wide?.byteLength ?? o.size * 4;
      const offset = o.header.dataOffset + r * bytes;
      const full = o.wide ? readFully(o.fd, o.wide, offset) : readFully(o.fd, into, offset, at * 4, bytes);
      if (!full) throw new DataError(`${o.path}: short read at byte ${offset}`);
      if (o.wide instanceof Float64Array) into.set(o.wide, at);
      else if (o.wide instanceof BigInt64Array) {
        for (let k = 0; k < o.size; k++) {
          const big = o.wide[k]!;
          if (big > 2147483647n || big < -2147483648n) throw new DataError(`${o.path}: value ${big} in row ${r} does not fit the int32 input '${o.name}'`);
          into[at + k] = Number(big);
        }
      }
    };
    return {
      description: `${rows.toLocaleString("en-US")} rows of ${opened.map((o) => `${o.name} ← ${o.path}`).join(", ")}, shuffled by seed ${options.seed}`,
      rows,
      batch(step: number, slice?: RowSlice): Batch {
        const rs = order(step, slice);
        const out: Record<string, Batch[string]> = {};
        for (const o of opened) {
          const data = o.float ? new Float32Array(rs.length * o.size) : new Int32Array(rs.length * o.size);
          rs.forEach((r, i) => readRow(o, r, data, i * o.size));
          out[o.name] = { shape: [rs.length, ...o.row], data };
        }
        return out;
      },
      close,
    };
  });
}
