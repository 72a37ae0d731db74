// Step 10 of compile: everything the steps produced, written out as the Plan document (src/plan/plan.ts).
import type { Cluster } from "../cost/cluster.js";
import { peakFormat } from "../cost/roofline.js";
import { computeDType } from "../cost/precision.js";
import type { Graph } from "../graph/graph.js";
import { graphToJson } from "../plan/graph-json.js";
import { MESH_AXES, PLAN_FORMAT, PLAN_VERSION, RANK_FORMULA, type Plan, type PlanAction, type PlanShard, type PlanStepPoint } from "../plan/plan.js";
import { formatAction } from "../schedule/action.js";
import type { ShardPlan, StepPoint } from "../shard/types.js";
import type { Boundaries } from "./boundaries.js";
import type { ProgramMemory } from "./memory.js";
import type { Program } from "./program.js";
import type { ResolvedSettings } from "./resolve.js";
import type { StepPrediction } from "./simulate.js";
import type { StageCostModel } from "./stage-costs.js";
import type { StageAssignment } from "./stages.js";

export interface AssembleInput {
  readonly fsmVersion: string;
  readonly model: { readonly name: string; readonly source: string };
  readonly cluster: Cluster;
  readonly settings: ResolvedSettings;
  readonly training: Graph;
  readonly stages: readonly StageAssignment[];
  readonly boundaries: Boundaries;
  readonly shards: readonly ShardPlan[];
  readonly programs: readonly Program[];
  readonly memory: readonly ProgramMemory[];
  readonly prediction: StepPrediction;
  readonly costs: StageCostModel;
}

const point = (p: StepPoint): PlanStepPoint => ({ when: p.when, phase: p.phase, layer: p.layer, microBatch: p.microBatch });

function shardJson(plan: ShardPlan): PlanShard {
  const owners: Record<string, number> = {};
  for (const p of plan.params) if (p.optimizer.kind === "owner") owners[p.name] = p.optimizer.rank;
  const bucket = (b: ShardPlan["gradBuckets"][number]) => ({ index: b.index, ...(b.owner !== undefined && { owner: b.owner }), params: [...b.params], numel: b.numel, bytes: b.bytes });
  return {
    stage: plan.stage,
    strategy: plan.strategy,
    ranks: [...plan.ranks],
    bytesPerParam: { ...plan.bytesPerParam },
    units: plan.units.map((u) => ({
      index: u.index,
      root: u.root,
      layers: [...u.layers],
      params: u.params.map((m) => [m.name, m.offset, m.numel] as const),
      numel: u.numel,
      paddedNumel: u.paddedNumel,
      shardNumel: u.shardNumel,
    })),
    gradBuckets: plan.gradBuckets.map(bucket),
    broadcastBuckets: plan.broadcastBuckets.map(bucket),
    owners,
    collectives: plan.collectives.map((c) => ({ kind: c.kind, of: c.of, unit: c.unit, bytes: c.bytes, ...(c.root !== undefined && { root: c.root }), at: point(c.at) })),
    tied: plan.tiedCollectives.map((t) => ({ param: t.param, unit: t.unit, bytes: t.bytes, stages: [...t.stages], order: t.reduction?.order ?? null, at: point(t.at) })),
    stateBytes: plan.memory.perRank.map((r) => ({ param: r.param, grad: r.grad, optimizer: r.optimizer })),
    zeroFormulaBytes: plan.memory.zeroFormula,
    ...(plan.partition && {
      partition: { largestShardBytes: plan.partition.largestShardBytes, greedyLargestShardBytes: plan.partition.greedyLargestShardBytes },
    }),
  };
}

function actionsJson(prog: Program, p: number, prediction: StepPrediction): PlanAction[] {
  const run = prediction.run.programs[p]!;
  return prog.actions.map((a, id): PlanAction => {
    const out: PlanAction = { id, text: formatAction(a.action), stream: a.stream, deps: [...a.deps], start: run.start[id]!, end: run.end[id]! };
    return {
      ...out,
      ...(a.partial.length > 0 && { partial: a.partial.map(([x, l]) => [x, l] as const) }),
      ...(a.gates.length > 0 && { gates: a.gates.map(([l, x]) => [l, x] as const) }),
      ...(a.collective && { collective: { ...a.collective } }),
    };
  });
}

export function assemblePlan(x: AssembleInput): Plan {
  const s = x.settings;
  const profile = x.cluster.profile;
  const peakMemory = new Array<number>(s.devices).fill(0);
  const modelState = new Array<number>(s.devices).fill(0);
  x.programs.forEach((prog, p) => {
    prog.ranks.forEach((rank, replica) => {
      // Every tensor rank of the group holds what tensor rank 0 (the program's rank) holds.
      for (let t = 0; t < s.tensorParallel; t++) {
        peakMemory[rank + t] = x.memory[p]!.arenaBytes;
        modelState[rank + t] = prog.stages.reduce((n, st) => n + x.shards[st]!.memory.perRank[replica]!.total, 0);
      }
    });
  });
  const stepTime = x.prediction.stepTime;
  const microBatchesPerStep = s.batch / s.microBatchSize;
  // Each rank of a tensor-parallel group computes its part of every micro-batch.
  const flopsPerStep = x.costs.flopsPerMicroBatch * microBatchesPerStep * s.tensorParallel;
  const peak = profile.peakFlops[peakFormat(computeDType(s.precision), "matrix")] * s.devices;
  const tokens = s.batch * (s.seq ?? 1);
  return {
    format: PLAN_FORMAT,
    version: PLAN_VERSION,
    fsm: x.fsmVersion,
    model: { name: x.model.name, source: x.model.source, parameters: x.training.modelParameterCount() },
    cluster: { profile: profile.name, devices: x.cluster.devices, nodes: x.cluster.nodes, devicesPerNode: profile.devicesPerNode, memoryBytes: profile.memory.capacity },
    settings: {
      stages: s.stages,
      dataParallel: s.dataParallel,
      tensorParallel: s.tensorParallel,
      ...(s.sequenceParallel && { sequenceParallel: true }),
      virtualStages: s.virtualStages,
      microBatches: s.microBatches,
      microBatchSize: s.microBatchSize,
      batch: s.batch,
      seq: s.seq ?? null,
      schedule: s.schedule,
      checkpoint: s.checkpoint,
      recomputeLayers: [...s.recomputeLayers],
      shard: s.shard,
      reshardAfterForward: s.reshardAfterForward,
      ...(s.shard === "fsdp" && s.shardGroup !== s.dataParallel && { shardGroup: s.shardGroup }),
      ...(s.noSync && { noSync: true }),
      bucketMB: s.bucketMB,
      fsdpPrefetch: s.fsdpPrefetch,
      precision: s.precision,
      ...(s.reduceDtype !== "fp32" && { reduceDtype: s.reduceDtype }),
      optimizer: s.optimizer.kind,
      clipGradNorm: s.clipGradNorm ?? null,
    },
    mesh: { axes: [...MESH_AXES], shape: [s.stages, s.dataParallel, s.tensorParallel], rank: RANK_FORMULA },
    graph: graphToJson(x.training),
    stages: x.stages.map((st) => ({ index: st.index, pipeRank: st.pipeRank, layers: [st.start, st.end - 1] as const, ranks: [...st.ranks], sends: [...x.boundaries.sends[st.index]!] })),
    shard: x.shards.map(shardJson),
    programs: x.programs.map((prog, p) => ({
      id: p,
      pipeRank: prog.pipeRank,
      stages: [...prog.stages],
      ranks: [...prog.ranks],
      streams: { compute: [...prog.compute], comm: [...prog.comm] },
      actions: actionsJson(prog, p, x.prediction),
    })),
    memory: x.memory.map((m, p) => ({
      program: p,
      arenaBytes: m.arenaBytes,
      peakBytes: m.peakBytes,
      buffers: m.buffers.map((b) => ({ name: b.name, kind: b.kind, bytes: b.bytes, offset: b.offset, from: b.from, ...(b.fromLayer !== undefined && { fromLayer: b.fromLayer }), to: b.to, ...(b.toLayer !== undefined && { toLayer: b.toLayer }) })),
    })),
    predicted: {
      stepTimeSeconds: stepTime,
      bubbleFraction: x.prediction.bubbleFraction,
      exposedCommSeconds: x.prediction.exposedComm,
      peakMemoryBytes: peakMemory,
      modelStateBytes: modelState,
      tokensPerSecond: stepTime > 0 ? tokens / stepTime : 0,
      mfu: stepTime > 0 ? flopsPerStep / stepTime / peak : 0,
      flopsPerStep,
    },
  };
}
