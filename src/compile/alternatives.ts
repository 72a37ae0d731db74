// What would fit when a plan does not: each change a user can make without more devices — checkpointing,
// a stronger shard strategy, 2–16× smaller micro-batches, twice the pipeline stages — planned for real, then all of
// them together.
import { SHARD_STRATEGIES } from "../check/settings-types.js";
import type { Graph } from "../graph/graph.js";
import { CompileError } from "./errors.js";
import type { ResolvedSettings } from "./resolve.js";

export interface Alternative {
  readonly change: string;
  readonly set: readonly string[];
  readonly settings: ResolvedSettings;
}

/** Candidate settings, each a valid plan request (divisibility and schedule constraints hold): single
 *  changes, and all of them together (checkpointing, fsdp, the deeper pipeline) as the last resort. */
export function alternatives(s: ResolvedSettings, layerCount: number): { singles: Alternative[]; together: Alternative | undefined } {
  const out: Alternative[] = [];
  if (s.checkpoint !== "always") out.push({ change: "checkpoint = always", set: ["parallel.checkpoint=always"], settings: { ...s, checkpoint: "always" } });
  for (const strategy of SHARD_STRATEGIES.slice(SHARD_STRATEGIES.indexOf(s.shard) + 1)) {
    // Plain FSDP over the whole group, as `--set parallel.shard=fsdp` alone gives.
    out.push({ change: `shard = ${strategy}`, set: [`parallel.shard=${strategy}`], settings: { ...s, shard: strategy, shardGroup: s.dataParallel, noSync: false } });
  }
  for (const factor of [2, 4, 8, 16]) {
    const microBatches = s.microBatches * factor;
    if (s.batch % (s.dataParallel * microBatches) !== 0) break;
    out.push({
      change: `chunks = ${microBatches}`,
      set: [`parallel.chunks=${microBatches}`],
      settings: { ...s, microBatches, microBatchSize: s.batch / (s.dataParallel * microBatches) },
    });
  }
  const deeper = deeperPipeline(s, layerCount);
  if (deeper) out.push(deeper);
  if (out.length < 2) return { singles: out, together: undefined };
  let all: ResolvedSettings = s;
  const set: string[] = [];
  for (const a of out) {
    // Of the shard strategies only the strongest joins the combination, of the chunk counts the largest.
    if (a.settings.shard !== s.shard && a.settings.shard !== "fsdp") continue;
    if (a.settings.microBatches !== s.microBatches && out.some((b) => b.settings.microBatches > a.settings.microBatches && b.settings.stages === s.stages)) continue;
    all = { ...all, ...diff(s, a.settings) };
    set.push(...a.set);
  }
  return { singles: out, together: { change: "all of these together", set, settings: all } };
}

function diff(base: ResolvedSettings, next: ResolvedSettings): Partial<ResolvedSettings> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(next)) if ((base as unknown as Record<string, unknown>)[k] !== v) out[k] = v;
  return out as Partial<ResolvedSettings>;
}

/** 2p stages on the same devices (half the data-parallel degree), when the batch and layers allow it. */
function deeperPipeline(s: ResolvedSettings, layerCount: number): Alternative | undefined {
  const stages = s.stages * 2;
  if (s.dataParallel % 2 !== 0 || stages * s.virtualStages > layerCount) return undefined;
  const dataParallel = s.dataParallel / 2;
  let microBatches = s.microBatches;
  if (s.schedule === "interleaved" && microBatches % stages !== 0) microBatches = stages;
  if (s.batch % (dataParallel * microBatches) !== 0) return undefined;
  // A hybrid shard group keeps its size where the halved group still divides into it (a whole group never
  // does: it is twice the new one); otherwise the group is the whole new one.
  const hybrid = s.shard === "fsdp" && s.shardGroup < s.dataParallel;
  const shardGroup = hybrid && dataParallel % s.shardGroup === 0 ? s.shardGroup : dataParallel;
  return {
    change: `stages = ${stages}, data_parallel = ${dataParallel}`,
    set: [
      `parallel.stages=${stages}`,
      `parallel.data_parallel=${dataParallel}`,
      ...(microBatches !== s.microBatches ? [`parallel.chunks=${microBatches}`] : []),
      ...(hybrid ? [`parallel.shard_group=${shardGroup}`] : []),
    ],
    settings: { ...s, stages, dataParallel, shardGroup, balance: undefined, microBatches, microBatchSize: s.batch / (dataParallel * microBatches) },
  };
}

/** Plans each alternative; returns those whose every program fits, with their largest arena. */
export function fittingAlternatives(
  s: ResolvedSettings,
  training: Graph,
  plan: (settings: ResolvedSettings) => { largestArena: number; fits: boolean },
): { change: string; set: readonly string[]; peakBytes: number }[] {
  const out: { change: string; set: readonly string[]; peakBytes: number }[] = [];
  const attempt = (a: Alternative): void => {
    try {
      const r = plan(a.settings);
      if (r.fits) out.push({ change: a.change, set: a.set, peakBytes: r.largestArena });
    } catch (e) {
      // An alternative the model cannot take (e.g. a stage pin the new split breaks) is simply not offered.
      if (!(e instanceof CompileError)) throw e;
    }
  };
  const { singles, together } = alternatives(s, training.layers().length);
  singles.forEach(attempt);
  if (out.length === 0 && together) attempt(together);
  return out;
}
