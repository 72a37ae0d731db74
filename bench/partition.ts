// bench/partition: time of the exact pipeline-stage partitioner for L in {24, 100, 400} layers and p in
// {4, 16, 64} stages (where p <= L), on uniform and on random layer costs; then, on 1,000 random skewed
// instances, how often the exact split beats the prefix-sum heuristic (FairScale balance_by_time-like) and by
// how much (relative reduction of the bottleneck stage time).
// Prints one JSON object; run with `node dist/bench/partition.js` after `npm run build`.
import { Rng } from "../src/interp/random.js";
import { blockPartitionHeuristic, optimalPartition, type PartitionProblem } from "../src/search/partition.js";
import { medianMs } from "./timing.js";

/** Additive stage times from per-layer costs, through prefix sums so stageTime is O(1) (as a cost model's
 *  would be); differences of a non-decreasing prefix keep "a longer stage is never faster". */
function additive(times: readonly number[], stages: number): PartitionProblem {
  const prefix = [0];
  for (const t of times) prefix.push(prefix[prefix.length - 1]! + t);
  return { layers: times.length, stages, stageTime: (_k, i, j) => prefix[j]! - prefix[i]!, fits: () => true };
}

const rng = new Rng(2024);
/** Mostly small layers, some ten to fifty times bigger (embeddings, heads, wide blocks). */
const skewed = (n: number): number[] => Array.from({ length: n }, () => (rng.uniform() < 0.15 ? 10 + 40 * rng.uniform() : 0.5 + rng.uniform()));

const timings: Record<string, unknown>[] = [];
for (const L of [24, 100, 400]) {
  for (const p of [4, 16, 64]) {
    if (p > L) continue;
    const runs = L >= 400 ? 5 : 21;
    const uniform = additive(new Array<number>(L).fill(1), p);
    const random = additive(skewed(L), p);
    timings.push({
      layers: L,
      stages: p,
      uniformMs: medianMs(() => void optimalPartition(uniform), runs),
      randomMs: medianMs(() => void optimalPartition(random), runs),
    });
  }
}

const INSTANCES = 1000;
let better = 0;
let sumGain = 0;
let maxGain = 0;
for (let n = 0; n < INSTANCES; n++) {
  const L = 4 + rng.int(97); // 4..100
  const p = 2 + rng.int(Math.min(15, L - 1)); // 2..min(16, L)
  const times = skewed(L);
  const problem = additive(times, p);
  const exact = optimalPartition(problem)!.bottleneck;
  const heuristic = optimalPartition({ ...problem, sizes: blockPartitionHeuristic(times, p) })!.bottleneck;
  if (exact > heuristic) throw new Error(`instance ${n}: exact ${exact} worse than heuristic ${heuristic}`);
  const gain = 1 - exact / heuristic;
  if (exact < heuristic) better++;
  sumGain += gain;
  maxGain = Math.max(maxGain, gain);
}

console.log(
  JSON.stringify({
    timings,
    versusHeuristic: {
      instances: INSTANCES,
      layers: "4..100",
      stages: "2..16",
      strictlyBetterFraction: better / INSTANCES,
      meanImprovementPct: Number(((100 * sumGain) / INSTANCES).toFixed(2)),
      maxImprovementPct: Number((100 * maxGain).toFixed(2)),
    },
  }),
);
