// The order a data source visits its items (token windows, .npy rows): every item once per epoch, in a
// permutation drawn from the seed and the epoch (Fisher-Yates), a fresh one each epoch. Only the current
// epoch's permutation is kept.
import { Rng, streamSeed } from "../interp/random.js";

/** The item read as the i-th of the run (i = step · batch + row). */
export function epochOrder(seed: number, count: number, source: string): (i: number) => number {
  let epoch = -1;
  let order = new Uint32Array(0);
  return (i) => {
    const e = Math.floor(i / count);
    if (e !== epoch) {
      const rng = new Rng(streamSeed(seed, `${source} epoch ${e}`));
      order = new Uint32Array(count);
      for (let k = 0; k < count; k++) order[k] = k;
      for (let k = count - 1; k > 0; k--) {
        const j = rng.int(k + 1);
        [order[k], order[j]] = [order[j]!, order[k]!];
      }
      epoch = e;
    }
    return order[i % count]!;
  };
}
