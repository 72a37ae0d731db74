// Checks the `train` and `parallel` sections into typed configs: known keys, value types and ranges, defaults,
// and the train settings that contradict each other. Choices left as `auto` are the planner's.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type { SettingsSection } from "../parse/ast.js";
import { evalExpr } from "./const-eval.js";
import type { Env } from "./env.js";
import {
  balance,
  bool,
  dataSource,
  intAtLeast,
  isProblem,
  lossScale,
  optimizer,
  orAuto,
  positiveNumber,
  word,
  type Reader,
} from "./settings-readers.js";
import {
  CHECKPOINT_MODES,
  type CheckpointSetting,
  LAYER_CHECKPOINT_MODES,
  PRECISIONS,
  SCHEDULES,
  SHARD_STRATEGIES,
  type DataSource,
  type Optimizer,
  type ParallelConfig,
  type TrainConfig,
} from "./settings-types.js";
import { didYouMean } from "./suggest.js";


const TRAIN_KEYS = {
  batch: intAtLeast(1),
  seq: intAtLeast(1),
  steps: intAtLeast(1),
  seed: intAtLeast(0),
  optimizer,
  clip_grad_norm: positiveNumber,
  precision: word(PRECISIONS),
  reduce_dtype: word(PRECISIONS),
  loss_scale: lossScale,
  data: dataSource,
} satisfies Record<string, Reader<unknown>>;


/** `checkpoint`: the schedule-level modes, or `selective` (Korthikanti et al.'s selective recomputation: no
 *  whole-stage recompute; each layer's attention core is recomputed in its backward — which fsm's fused
 *  attention always does, never storing the scores — and the plan search recomputes whole only the layers
 *  device memory requires). */
const checkpointMode: Reader<CheckpointSetting> = (v) => {
  const w = v.k === "word" ? v.name : v.k === "str" ? v.v : undefined;
  if (w === "selective") return "selective";
  return word(CHECKPOINT_MODES)(v);
};

const PARALLEL_KEYS = {
  devices: orAuto(intAtLeast(1)),
  stages: orAuto(intAtLeast(1)),
  balance,
  chunks: orAuto(intAtLeast(1)),
  schedule: orAuto(word(SCHEDULES)),
  virtual_stages: orAuto(intAtLeast(1)),
  checkpoint: orAuto(checkpointMode),
  shard: orAuto(word(SHARD_STRATEGIES)),
  reshard_after_forward: orAuto(bool),
  bucket_mb: positiveNumber,
  data_parallel: orAuto(intAtLeast(1)),
  fsdp_min_params: positiveNumber,
  fsdp_prefetch: intAtLeast(1),
  layer_checkpoint: orAuto(word(LAYER_CHECKPOINT_MODES)),
  tensor_parallel: orAuto(intAtLeast(1)),
  sequence_parallel: orAuto(bool),
  shard_group: orAuto(intAtLeast(1)),
  no_sync: orAuto(bool),
} satisfies Record<string, Reader<unknown>>;


/** Values by key plus where each was written (for later diagnostics). */
interface ReadSection {
  readonly values: Map<string, unknown>;
  readonly spans: Map<string, Span>;
}

function readSection(
  diags: Diagnostic[],
  section: SettingsSection | undefined,
  keys: Readonly<Record<string, Reader<unknown>>>,
  env: Env,
): ReadSection {
  const values = new Map<string, unknown>();
  const spans = new Map<string, Span>();
  if (!section) return { values, spans };
  const label = section.kind === "Train" ? "train" : "parallel";
  for (const s of section.settings) {
    const key = s.key.name;
    const reader = keys[key];
    if (!reader) {
      diags.push(error("FSM310", `unknown ${label} setting '${key}'`, s.key.span, didYouMean(key, Object.keys(keys))));
      continue;
    }
    if (spans.has(key)) {
      const p = spans.get(key)!;
      diags.push(error("FSM311", `'${key}' is already set at ${p.file}:${p.line}:${p.column}`, s.key.span));
      continue;
    }
    spans.set(key, s.span);
    const v = evalExpr({ diags, words: true }, s.value, env);
    if (v.k === "error") continue;
    const r = reader(v);
    if (isProblem(r)) diags.push(error("FSM500", `${label}.${key} ${r.problem}`, s.value.span));
    else values.set(key, r);
  }
  return { values, spans };
}

export interface CheckedTrain {
  readonly config: TrainConfig;
  readonly spans: ReadonlyMap<string, Span>;
}

export function checkTrain(diags: Diagnostic[], section: SettingsSection, env: Env, usesSeq: boolean): CheckedTrain | undefined {
  const before = diags.length;
  const { values, spans } = readSection(diags, section, TRAIN_KEYS, env);
  const need = (key: string, why: string) => {
    if (!spans.has(key)) diags.push(error("FSM500", `train needs '${key}' (${why})`, section.keyword.span));
  };
  need("batch", "the global batch size");
  need("optimizer", "e.g. optimizer = adamw(lr: 3e-4)");
  if (usesSeq) need("seq", "the model's inputs use the sequence dimension S");
  const precision = (values.get("precision") as TrainConfig["precision"] | undefined) ?? "fp32";
  if (spans.has("loss_scale") && precision !== "fp16") {
    diags.push(error("FSM503", `loss_scale only applies to precision = fp16 (precision is ${precision})`, spans.get("loss_scale")!));
  }
  const reduceDtype = (values.get("reduce_dtype") as TrainConfig["reduceDtype"] | undefined) ?? "fp32";
  if (reduceDtype !== "fp32" && reduceDtype !== precision) {
    diags.push(error("FSM503", `reduce_dtype = ${reduceDtype} needs precision = ${reduceDtype} (precision is ${precision}): gradients are reduced in fp32 or in the compute precision`, spans.get("reduce_dtype")!));
  }
  if (diags.length > before && diags.slice(before).some((d) => d.severity === "error")) return undefined;
  const seq = values.get("seq") as number | undefined;
  const clip = values.get("clip_grad_norm") as number | undefined;
  const config: TrainConfig = {
    batch: values.get("batch") as number,
    ...(seq !== undefined ? { seq } : {}),
    steps: (values.get("steps") as number | undefined) ?? 10,
    seed: (values.get("seed") as number | undefined) ?? 0,
    optimizer: values.get("optimizer") as Optimizer,
    ...(clip !== undefined ? { clipGradNorm: clip } : {}),
    precision,
    reduceDtype,
    lossScale: (values.get("loss_scale") as TrainConfig["lossScale"] | undefined) ?? "dynamic",
    data: (values.get("data") as DataSource | undefined) ?? { kind: "synthetic" },
  };
  return { config, spans };
}

export interface CheckedParallel {
  readonly config: ParallelConfig;
  readonly spans: ReadonlyMap<string, Span>;
}

export const DEFAULT_PARALLEL: ParallelConfig = {
  devices: "auto",
  stages: "auto",
  chunks: "auto",
  schedule: "auto",
  virtualStages: "auto",
  checkpoint: "auto",
  shard: "auto",
  reshardAfterForward: true,
  bucketMB: 25,
  dataParallel: "auto",
  fsdpMinParams: 1e8,
  fsdpPrefetch: 1,
  layerCheckpoint: "auto",
  // Not searched unless asked for (`tensor_parallel = auto`): the runtime does not run tensor-parallel
  // plans yet, and a plan a user can run is the default.
  tensorParallel: 1,
  sequenceParallel: false,
  shardGroup: "auto",
  noSync: "auto",
};

export function checkParallel(diags: Diagnostic[], section: SettingsSection | undefined, env: Env): CheckedParallel {
  const { values, spans } = readSection(diags, section, PARALLEL_KEYS, env);
  const get = <T>(key: string, fallback: T): T => (values.has(key) ? (values.get(key) as T) : fallback);
  const bal = values.get("balance") as readonly number[] | undefined;
  const config: ParallelConfig = {
    devices: get("devices", DEFAULT_PARALLEL.devices),
    stages: get("stages", DEFAULT_PARALLEL.stages),
    ...(bal ? { balance: bal } : {}),
    chunks: get("chunks", DEFAULT_PARALLEL.chunks),
    schedule: get("schedule", DEFAULT_PARALLEL.schedule),
    virtualStages: get("virtual_stages", DEFAULT_PARALLEL.virtualStages),
    checkpoint: get("checkpoint", DEFAULT_PARALLEL.checkpoint),
    shard: get("shard", DEFAULT_PARALLEL.shard),
    reshardAfterForward: get("reshard_after_forward", DEFAULT_PARALLEL.reshardAfterForward),
    bucketMB: get("bucket_mb", DEFAULT_PARALLEL.bucketMB),
    dataParallel: get("data_parallel", DEFAULT_PARALLEL.dataParallel),
    fsdpMinParams: get("fsdp_min_params", DEFAULT_PARALLEL.fsdpMinParams),
    fsdpPrefetch: get("fsdp_prefetch", DEFAULT_PARALLEL.fsdpPrefetch),
    layerCheckpoint: get("layer_checkpoint", DEFAULT_PARALLEL.layerCheckpoint),
    tensorParallel: get("tensor_parallel", DEFAULT_PARALLEL.tensorParallel),
    sequenceParallel: get("sequence_parallel", DEFAULT_PARALLEL.sequenceParallel),
    shardGroup: get("shard_group", DEFAULT_PARALLEL.shardGroup),
    noSync: get("no_sync", DEFAULT_PARALLEL.noSync),
  };
  return { config, spans };
}

/** Settings that contradict each other or the model: knowable before any planning. */
