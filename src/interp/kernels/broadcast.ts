// NumPy broadcasting by index maps: for each element of the output, which element of an operand it reads.
// Plain and allocation-heavy, which suits a reference interpreter of small models.
import { sizeOf } from "../tensor.js";

/** For each element of `out` (row-major), the flat index of the element of a `from`-shaped tensor that
 *  broadcasts to it (right-aligned; size-1 and missing dims repeat). */
export function broadcastIndex(from: readonly number[], out: readonly number[]): Int32Array {
  const n = sizeOf(out);
  const idx = new Int32Array(n);
  const r = out.length;
  const off = r - from.length;
  if (off < 0) throw new Error(`internal: cannot broadcast [${from}] to [${out}]`);
  const st = new Array<number>(r).fill(0);
  let s = 1;
  for (let i = from.length - 1; i >= 0; i--) {
    const f = from[i]!;
    if (f !== 1 && f !== out[i + off]) throw new Error(`internal: cannot broadcast [${from}] to [${out}]`);
    st[i + off] = f === 1 ? 0 : s;
    s *= f;
  }
  const ctr = new Array<number>(r).fill(0);
  let cur = 0;
  for (let k = 0; k < n; k++) {
    idx[k] = cur;
    for (let d = r - 1; d >= 0; d--) {
      ctr[d]!++;
      cur += st[d]!;
      if (ctr[d]! < out[d]!) break;
      cur -= st[d]! * out[d]!;
      ctr[d] = 0;
    }
  }
  return idx;
}

/** Row-major strides of a shape. */
export function stridesOf(shape: readonly number[]): number[] {
  const st = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i]!;
  }
  return st;
}
