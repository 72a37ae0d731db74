// Step 3 of compile: layers → (virtual) pipeline stages, stages → pipeline ranks and their replicas' ranks.
import type { Graph } from "../graph/graph.js";
import { meshRank } from "../plan/plan.js";
import { CompileError } from "./errors.js";
import type { ResolvedSettings } from "./resolve.js";

export interface StageAssignment {
  /** Virtual stage k. */
  readonly index: number;
  /** Interleaved placement (Megatron-LM): stage k on pipeline rank k mod p. */
  readonly pipeRank: number;
  /** Layers [start, end). */
  readonly start: number;
  readonly end: number;
  /** Global ranks of the stage's data-parallel replicas, by replica. */
  readonly ranks: readonly number[];
}

/** Layer counts per stage: the balance as given, else an even split (the first n mod k stages one more). */
export function stageSizes(layerCount: number, stageCount: number, balance: readonly number[] | undefined): number[] {
  if (balance) return [...balance];
  const base = Math.floor(layerCount / stageCount);
  const extra = layerCount % stageCount;
  return Array.from({ length: stageCount }, (_, k) => base + (k < extra ? 1 : 0));
}

export function assignStages(graph: Graph, s: ResolvedSettings): StageAssignment[] {
  const layers = graph.layers();
  const count = s.stages * s.virtualStages;
  const sizes = stageSizes(layers.length, count, s.balance);
  const out: StageAssignment[] = [];
  let start = 0;
  sizes.forEach((size, index) => {
    const pipeRank = index % s.stages;
    const ranks = Array.from({ length: s.dataParallel }, (_, r) => meshRank(s, pipeRank, r));
    out.push({ index, pipeRank, start, end: start + size, ranks });
    start += size;
  });
  // Pins are checked against a balance by the checker; an even split must honour them too.
  for (const l of layers) {
    const pin = l.annotations.stage;
    if (pin === undefined) continue;
    const at = out.findIndex((st) => l.index >= st.start && l.index < st.end);
    if (pin !== at) {
      throw new CompileError(
        `layer '${l.name}' is pinned to stage ${pin} but splitting ${layers.length} layers evenly over ${count} stages puts it on stage ${at}; ` +
          `give a balance that honours the pin (--set "parallel.balance=[...]")`,
      );
    }
  }
  return out;
}
