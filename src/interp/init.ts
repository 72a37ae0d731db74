// Deterministic parameter initialization from the seed: every parameter draws from its own stream (seeded
// by the seed and its name), so a value does not depend on which other parameters exist or their order.
import { numel } from "../graph/dim.js";
import type { Graph } from "../graph/graph.js";
import { wholeShape } from "../graph/param-split.js";
import { Rng, streamSeed } from "./random.js";
import { floatArray, type FloatKind, type FloatTensor } from "./tensor.js";

/** Standard deviation of `normal` initialization (GPT-2's). */
export const INIT_STD = 0.02;

/**
 * One tensor per parameter of the model (canonical name; whole, also for a tensor-parallel rank's graph): `normal` → N(0, 0.02²), `zeros`, `ones`, `uniform_fan_in` →
 * U(−1/√fan_in, 1/√fan_in) with fan_in = the product of all dims but the first (torch's nn.Linear default).
 */
export function initParams(g: Graph, seed: number, float: FloatKind = "f32"): Map<string, FloatTensor> {
  const out = new Map<string, FloatTensor>();
  for (const p of g.params()) {
    // A tensor-parallel rank's graph holds slices: the whole model's parameter is drawn (the same values as
    // the 1-device model's), and each rank takes its slice of it (param-split.ts).
    const local = p.type.shape.map((d) => numel([d]));
    const shape = p.split ? wholeShape(local, p.split) : local;
    const data = floatArray(float, shape.reduce((a, b) => a * b, 1));
    const rng = new Rng(streamSeed(seed, p.name));
    switch (p.init) {
      case "normal":
        for (let i = 0; i < data.length; i++) data[i] = INIT_STD * rng.normal();
        break;
      case "zeros":
        break;
      case "ones":
        data.fill(1);
        break;
      case "uniform_fan_in": {
        const fanIn = shape.length > 1 ? shape.slice(1).reduce((a, b) => a * b, 1) : shape[0]!;
        const bound = 1 / Math.sqrt(fanIn);
        for (let i = 0; i < data.length; i++) data[i] = (2 * rng.uniform() - 1) * bound;
        break;
      }
    }
    out.set(p.name, { shape, data });
  }
  return out;
}
