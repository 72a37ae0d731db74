// The order a data source visits its items (token windows, .npy rows): every item once per epoch, in a
// permutation drawn from the seed and the epoch (Fisher-Yates), a fresh one each epoch. Only the current
// epoch's permutation is kept.
import { Rng, streamSeed } from "../interp/random.js";
import { rowsOf, type RowSlice } from "./rows.js";

/** The item read as the i-th of the run (i = step · batch + row). */
function epochOrder(seed: number, count: number, source: string): (i: number) => number {
  let epoch = -1;
  const order = new Uint32Array(count);
  return (i) => {
    const e = Math.floor(i / count);
    if (e !== epoch) {
      const rng = new Rng(streamSeed(seed, `${source} epoch ${e}`));
      for (let k = 0; k < count; k++) order[k] = k;
      for (let k = count - 1; k > 0; k--) {
        const j = rng.int(k + 1);
        const t = order[k]!;
        order[k] = order[j]!;
        order[j] = t;
      }
      epoch = e;
    }
    return order[i % count]!;
  };
}

/** The items of step `step`'s batch of `batch` (or of its `rows`: a data-parallel rank's share), in order. */
export function batchOrder(seed: number, count: number, source: string, batch: number): (step: number, rows?: RowSlice) => number[] {
  const order = epochOrder(seed, count, source);
  return (step, rows) => {
    const { from, count: n } = rowsOf(batch, rows);
    return Array.from({ length: n }, (_, r) => order(step * batch + from + r));
  };
}
