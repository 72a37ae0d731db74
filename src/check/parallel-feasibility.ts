// Parallel settings that contradict each other or the model, knowable before any planning: balance vs layer
// count, devices vs stages × data-parallel degree, virtual stages, batch divisibility, stage pins.
import { error, warning, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type { LayerInfo } from "../graph/graph.js";
import type { CheckedParallel } from "./settings.js";
import type { Auto, TrainConfig } from "./settings-types.js";

export function checkParallelFeasible(
  diags: Diagnostic[],
  p: CheckedParallel,
  fallbackSpan: Span,
  layers: readonly LayerInfo[],
  train: TrainConfig | undefined,
  layerSpan: (layer: number) => Span | undefined,
): void {
  const c = p.config;
  const at = (key: string) => p.spans.get(key) ?? fallbackSpan;
  const num = (x: number | Auto): x is number => x !== "auto";
  const n = layers.length;
  let stages = c.stages;
  // Under the interleaved schedule a balance lists every virtual stage (Megatron-LM's model chunks, in layer
  // order: chunk k on pipeline rank k mod stages), so it has stages × virtual_stages entries.
  const virtual = num(c.virtualStages) ? c.virtualStages : 1;
  if (c.balance) {
    const sum = c.balance.reduce((a, b) => a + b, 0);
    if (sum !== n) {
      diags.push(error("FSM501", `balance [${c.balance.join(", ")}] covers ${sum} layers but the model has ${n} (${layerList(layers)})`, at("balance")));
    }
    if (c.balance.length % virtual !== 0) {
      diags.push(error("FSM503", `balance lists ${c.balance.length} stages, not a multiple of virtual_stages = ${virtual} (it lists every virtual stage: stages × virtual_stages entries)`, at("balance")));
    } else if (num(stages) && stages * virtual !== c.balance.length) {
      const want = virtual > 1 ? `stages × virtual_stages = ${stages} × ${virtual}` : `stages = ${stages}`;
      diags.push(error("FSM503", `${want} but balance lists ${c.balance.length} stages`, at("stages")));
    }
    stages = Math.max(1, Math.floor(c.balance.length / virtual));
  }
  if (num(stages) && stages > n) {
    diags.push(error("FSM503", `stages = ${stages} but the model has only ${n} layers to split`, at("stages")));
  }
  // devices = stages × data_parallel × tensor_parallel (the tensor factor named only when it is not 1).
  const tp = num(c.tensorParallel) ? c.tensorParallel : undefined;
  const tpText = tp !== undefined && tp > 1 ? ` × tensor_parallel` : "";
  const tpValue = tp !== undefined && tp > 1 ? ` × ${tp}` : "";
  if (num(c.devices) && tp !== undefined && c.devices % tp !== 0) {
    diags.push(error("FSM502", `devices = ${c.devices} is not a multiple of tensor_parallel = ${tp}`, at("devices")));
  } else if (num(c.devices) && num(stages) && num(c.dataParallel) && tp !== undefined && stages * c.dataParallel * tp !== c.devices) {
    diags.push(
      error("FSM502", `devices = ${c.devices} but stages × data_parallel${tpText} = ${stages} × ${c.dataParallel}${tpValue} = ${stages * c.dataParallel * tp}`, at("devices")),
    );
  } else if (num(c.devices) && num(stages) && c.devices % (stages * (tp ?? 1)) !== 0) {
    diags.push(error("FSM502", `devices = ${c.devices} is not a multiple of stages${tpText} = ${stages}${tpValue}`, at("devices")));
  } else if (num(c.devices) && num(c.dataParallel) && c.devices % (c.dataParallel * (tp ?? 1)) !== 0) {
    diags.push(error("FSM502", `devices = ${c.devices} is not a multiple of data_parallel${tpText} = ${c.dataParallel}${tpValue}`, at("devices")));
  }
  // Sequence parallelism gives each rank of a group 1/tensor_parallel of the sequence.
  if (c.sequenceParallel === true && tp !== undefined && tp > 1 && train?.seq !== undefined && train.seq % tp !== 0) {
    diags.push(error("FSM503", `sequence_parallel = true: the sequence of ${train.seq} does not split over tensor_parallel = ${tp} ranks`, at("sequence_parallel")));
  }
  if (num(c.virtualStages) && c.virtualStages > 1 && c.schedule !== "interleaved" && c.schedule !== "auto") {
    diags.push(error("FSM503", `virtual_stages = ${c.virtualStages} needs schedule = interleaved (schedule is ${c.schedule})`, at("virtual_stages")));
  }
  if (num(c.virtualStages) && num(stages) && stages * c.virtualStages > n) {
    diags.push(error("FSM503", `${stages} stages × ${c.virtualStages} virtual stages = ${stages * c.virtualStages} exceeds the ${n} layers`, at("virtual_stages")));
  }
  if (c.shard !== "fsdp" && c.shard !== "auto" && p.spans.has("reshard_after_forward")) {
    // A warning, not an error: sweeping `--set parallel.shard=...` over a file written for fsdp must work.
    diags.push(warning("FSM503", `reshard_after_forward only applies to shard = fsdp (shard is ${c.shard}); it is ignored`, at("reshard_after_forward")));
  }
  for (const key of ["shard_group", "no_sync"] as const) {
    if (c.shard !== "fsdp" && c.shard !== "auto" && p.spans.has(key)) {
      diags.push(warning("FSM503", `${key} only applies to shard = fsdp (shard is ${c.shard}); it is ignored`, at(key)));
    }
  }
  // Each shard group is a whole number of the stage's data-parallel ranks; the groups replicate each other.
  if (c.shard === "fsdp" && num(c.shardGroup) && num(c.dataParallel) && c.dataParallel % c.shardGroup !== 0) {
    diags.push(error("FSM503", `shard_group = ${c.shardGroup} does not divide data_parallel = ${c.dataParallel}`, at("shard_group")));
  } else if (c.shard === "fsdp" && c.shardGroup === 1 && c.dataParallel !== 1) {
    diags.push(error("FSM503", "shard_group = 1 shards nothing: every rank would hold the whole model (that is shard = none)", at("shard_group")));
  }
  if (train && num(c.chunks)) {
    const dp = num(c.dataParallel) ? c.dataParallel : 1;
    if (train.batch % (dp * c.chunks) !== 0) {
      diags.push(
        error("FSM504", `batch = ${train.batch} does not split into data_parallel × chunks = ${dp} × ${c.chunks} equal micro-batches`, at("chunks")),
      );
    }
  }
  // Pins name a balance entry (a virtual stage under interleaving), as compile assigns layers.
  checkPins(diags, layers, c.balance ? c.balance.length : stages, c.balance, (l) => layerSpan(l) ?? fallbackSpan);
}

/** Stage pins must be in range, in layer order, and agree with an explicit balance. */
function checkPins(
  diags: Diagnostic[],
  layers: readonly LayerInfo[],
  stages: number | Auto,
  bal: readonly number[] | undefined,
  spanOf: (layer: number) => Span,
): void {
  let last = -1;
  let lastName = "";
  const stageOf = bal ? layers.map((_, i) => stageOfLayer(bal, i)) : undefined;
  for (const l of layers) {
    const s = l.annotations.stage;
    if (s === undefined) continue;
    if (stages !== "auto" && s >= stages) {
      diags.push(error("FSM505", `layer '${l.name}' is pinned to stage ${s} but there are only ${stages} stages`, spanOf(l.index)));
    } else if (s < last) {
      diags.push(error("FSM505", `layer '${l.name}' is pinned to stage ${s}, before '${lastName}' on stage ${last}: stages must follow layer order`, spanOf(l.index)));
    } else if (stageOf && stageOf[l.index] !== s) {
      diags.push(error("FSM505", `layer '${l.name}' is pinned to stage ${s} but balance puts it on stage ${stageOf[l.index]}`, spanOf(l.index)));
    }
    last = Math.max(last, s);
    lastName = l.name;
  }
}

function stageOfLayer(bal: readonly number[], layer: number): number {
  let acc = 0;
  for (let s = 0; s < bal.length; s++) {
    acc += bal[s]!;
    if (layer < acc) return s;
  }
  return bal.length - 1;
}

function layerList(layers: readonly LayerInfo[]): string {
  const names = layers.map((l) => l.name);
  return names.length <= 6 ? names.join(", ") : `${names.slice(0, 3).join(", ")}, ..., ${names.slice(-2).join(", ")}`;
}

