// Checks the `train` and `parallel` sections into typed configs: known keys, value types and ranges, and the
// parallel settings that are impossible from the file alone (balance vs layer count, devices vs stages ×
// data-parallel degree, batch divisibility, stage pins). Choices left as `auto` are the planner's.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type { LayerInfo } from "../graph/graph.js";
import type { SettingsSection } from "../parse/ast.js";
import { evalExpr } from "./const-eval.js";
import type { Env } from "./env.js";
import {
  CHECKPOINT_MODES,
  PRECISIONS,
  SCHEDULES,
  SHARD_STRATEGIES,
  type Auto,
  type DataSource,
  type Optimizer,
  type ParallelConfig,
  type TrainConfig,
} from "./settings-types.js";
import { didYouMean } from "./suggest.js";
import { describe, type NamedValue, type Value } from "./values.js";

/** A reader turns a value into a setting, or returns the message of why it cannot. */
type Reader<T> = (v: Value) => T | { readonly problem: string };

const isProblem = (x: unknown): x is { problem: string } => typeof x === "object" && x !== null && "problem" in x;

const intAtLeast =
  (min: number): Reader<number> =>
  (v) =>
    v.k === "int" && v.v >= min ? v.v : { problem: `must be an int >= ${min}, got ${describe(v)}` };
const positiveNumber: Reader<number> = (v) =>
  (v.k === "int" || v.k === "float") && v.v > 0 ? v.v : { problem: `must be a number > 0, got ${describe(v)}` };
const nonNegativeNumber: Reader<number> = (v) =>
  (v.k === "int" || v.k === "float") && v.v >= 0 ? v.v : { problem: `must be a number >= 0, got ${describe(v)}` };
const bool: Reader<boolean> = (v) => (v.k === "bool" ? v.v : { problem: `must be true or false, got ${describe(v)}` });
const word =
  <T extends string>(values: readonly T[]): Reader<T> =>
  (v) => {
    const w = v.k === "word" ? v.name : v.k === "str" ? v.v : undefined;
    if (w !== undefined && (values as readonly string[]).includes(w)) return w as T;
    const hint = w !== undefined ? didYouMean(w, values).map((s) => `; ${s}`).join("") : "";
    return { problem: `must be one of ${values.join(", ")}, got ${describe(v)}${hint}` };
  };
const orAuto =
  <T>(r: Reader<T>): Reader<T | Auto> =>
  (v) =>
    v.k === "auto" ? "auto" : r(v);

// ---------- optimizer and data constructors ----------

function readArgs(
  ctor: Extract<Value, { k: "ctor" }>,
  spec: Readonly<Record<string, { read: Reader<unknown>; default?: unknown }>>,
): Record<string, unknown> | { problem: string } {
  const names = Object.keys(spec);
  const out: Record<string, unknown> = {};
  let pos = 0;
  for (const a of ctor.args as NamedValue[]) {
    const key = a.name ?? names[pos++];
    if (key === undefined || !(key in spec)) {
      const hint = a.name ? didYouMean(a.name, names).map((s) => `; ${s}`).join("") : "";
      return { problem: `${ctor.name}() has no argument ${a.name ? `'${a.name}'` : `number ${pos}`}${hint}` };
    }
    if (key in out) return { problem: `${ctor.name}() argument '${key}' is given twice` };
    const r = spec[key]!.read(a.value);
    if (isProblem(r)) return { problem: `${ctor.name}() argument '${key}' ${r.problem}` };
    out[key] = r;
  }
  for (const [k, s] of Object.entries(spec)) {
    if (k in out) continue;
    if (s.default === undefined) return { problem: `${ctor.name}() needs argument '${k}'` };
    out[k] = s.default;
  }
  return out;
}

const betas: Reader<readonly [number, number]> = (v) =>
  v.k === "tuple" && v.items.length === 2 && v.items.every((i) => (i.k === "int" || i.k === "float") && i.v >= 0 && i.v < 1)
    ? [(v.items[0] as { v: number }).v, (v.items[1] as { v: number }).v]
    : { problem: `must be a pair of numbers in [0, 1) such as (0.9, 0.999), got ${describe(v)}` };

const optimizer: Reader<Optimizer> = (v) => {
  if (v.k !== "ctor") return { problem: `must be sgd(...), adam(...) or adamw(...), got ${describe(v)}` };
  if (v.name === "sgd") {
    const a = readArgs(v, {
      lr: { read: positiveNumber },
      momentum: { read: nonNegativeNumber, default: 0 },
      weight_decay: { read: nonNegativeNumber, default: 0 },
      nesterov: { read: bool, default: false },
    });
    if (isProblem(a)) return a;
    return { kind: "sgd", lr: a.lr as number, momentum: a.momentum as number, weightDecay: a.weight_decay as number, nesterov: a.nesterov as boolean };
  }
  if (v.name === "adam" || v.name === "adamw") {
    const a = readArgs(v, {
      lr: { read: positiveNumber },
      betas: { read: betas, default: [0.9, 0.999] },
      eps: { read: positiveNumber, default: 1e-8 },
      weight_decay: { read: nonNegativeNumber, default: v.name === "adamw" ? 0.01 : 0 },
    });
    if (isProblem(a)) return a;
    return { kind: v.name, lr: a.lr as number, betas: a.betas as [number, number], eps: a.eps as number, weightDecay: a.weight_decay as number };
  }
  return { problem: `unknown optimizer '${v.name}' (use sgd, adam or adamw)${didYouMean(v.name, ["sgd", "adam", "adamw"]).map((s) => `; ${s}`).join("")}` };
};

const str: Reader<string> = (v) => (v.k === "str" ? v.v : { problem: `must be a string, got ${describe(v)}` });

const dataSource: Reader<DataSource> = (v) => {
  if (v.k !== "ctor") return { problem: `must be synthetic(), tokens("file.bin", dtype: u16) or npy(input: "file.npy", ...), got ${describe(v)}` };
  if (v.name === "synthetic") return v.args.length === 0 ? { kind: "synthetic" } : { problem: "synthetic() takes no arguments" };
  if (v.name === "tokens") {
    const a = readArgs(v, { path: { read: str }, dtype: { read: word(["u16", "u32"] as const), default: "u16" } });
    if (isProblem(a)) return a;
    return { kind: "tokens", path: a.path as string, dtype: a.dtype as "u16" | "u32" };
  }
  if (v.name === "npy") {
    const files: Record<string, string> = {};
    for (const a of v.args) {
      if (!a.name || a.value.k !== "str") return { problem: 'npy() takes input names with file paths: npy(x: "x.npy", y: "y.npy")' };
      files[a.name] = a.value.v;
    }
    return Object.keys(files).length > 0 ? { kind: "npy", files } : { problem: "npy() needs at least one input file" };
  }
  return { problem: `unknown data source '${v.name}' (use synthetic, tokens or npy)` };
};

const lossScale: Reader<"dynamic" | number> = (v) =>
  v.k === "word" && v.name === "dynamic" ? "dynamic" : positiveNumber(v);

const balance: Reader<readonly number[]> = (v) =>
  (v.k === "list" || v.k === "tuple") && v.items.length > 0 && v.items.every((i) => i.k === "int" && i.v >= 1)
    ? v.items.map((i) => (i as { v: number }).v)
    : { problem: `must be a list of layer counts >= 1 such as [6, 6, 6, 6], got ${describe(v)}` };

// ---------- sections ----------

const TRAIN_KEYS = {
  batch: intAtLeast(1),
  seq: intAtLeast(1),
  steps: intAtLeast(1),
  seed: intAtLeast(0),
  optimizer,
  clip_grad_norm: positiveNumber,
  precision: word(PRECISIONS),
  loss_scale: lossScale,
  data: dataSource,
} satisfies Record<string, Reader<unknown>>;

const PARALLEL_KEYS = {
  devices: orAuto(intAtLeast(1)),
  stages: orAuto(intAtLeast(1)),
  balance,
  chunks: orAuto(intAtLeast(1)),
  schedule: orAuto(word(SCHEDULES)),
  virtual_stages: orAuto(intAtLeast(1)),
  checkpoint: orAuto(word(CHECKPOINT_MODES)),
  shard: orAuto(word(SHARD_STRATEGIES)),
  reshard_after_forward: orAuto(bool),
  bucket_mb: positiveNumber,
  data_parallel: orAuto(intAtLeast(1)),
  fsdp_min_params: positiveNumber,
} satisfies Record<string, Reader<unknown>>;

export const TRAIN_SETTING_NAMES = Object.keys(TRAIN_KEYS);
export const PARALLEL_SETTING_NAMES = Object.keys(PARALLEL_KEYS);

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
  };
  return { config, spans };
}

/** Settings that contradict each other or the model: knowable before any planning. */
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
  if (c.balance) {
    const sum = c.balance.reduce((a, b) => a + b, 0);
    if (sum !== n) {
      diags.push(error("FSM501", `balance [${c.balance.join(", ")}] covers ${sum} layers but the model has ${n} (${layerList(layers)})`, at("balance")));
    }
    if (num(stages) && stages !== c.balance.length) {
      diags.push(error("FSM503", `stages = ${stages} but balance lists ${c.balance.length} stages`, at("stages")));
    }
    stages = c.balance.length;
  }
  if (num(stages) && stages > n) {
    diags.push(error("FSM503", `stages = ${stages} but the model has only ${n} layers to split`, at("stages")));
  }
  if (num(c.devices) && num(stages) && num(c.dataParallel) && stages * c.dataParallel !== c.devices) {
    diags.push(
      error("FSM502", `devices = ${c.devices} but stages × data_parallel = ${stages} × ${c.dataParallel} = ${stages * c.dataParallel}`, at("devices")),
    );
  } else if (num(c.devices) && num(stages) && c.devices % stages !== 0) {
    diags.push(error("FSM502", `devices = ${c.devices} is not a multiple of stages = ${stages}`, at("devices")));
  } else if (num(c.devices) && num(c.dataParallel) && c.devices % c.dataParallel !== 0) {
    diags.push(error("FSM502", `devices = ${c.devices} is not a multiple of data_parallel = ${c.dataParallel}`, at("devices")));
  }
  if (num(c.virtualStages) && c.virtualStages > 1 && c.schedule !== "interleaved" && c.schedule !== "auto") {
    diags.push(error("FSM503", `virtual_stages = ${c.virtualStages} needs schedule = interleaved (schedule is ${c.schedule})`, at("virtual_stages")));
  }
  if (num(c.virtualStages) && num(stages) && stages * c.virtualStages > n) {
    diags.push(error("FSM503", `${stages} stages × ${c.virtualStages} virtual stages = ${stages * c.virtualStages} exceeds the ${n} layers`, at("virtual_stages")));
  }
  if (c.shard !== "fsdp" && c.shard !== "auto" && p.spans.has("reshard_after_forward")) {
    diags.push(error("FSM503", `reshard_after_forward only applies to shard = fsdp (shard is ${c.shard})`, at("reshard_after_forward")));
  }
  if (train && num(c.chunks)) {
    const dp = num(c.dataParallel) ? c.dataParallel : 1;
    if (train.batch % (dp * c.chunks) !== 0) {
      diags.push(
        error("FSM504", `batch = ${train.batch} does not split into data_parallel × chunks = ${dp} × ${c.chunks} equal micro-batches`, at("chunks")),
      );
    }
  }
  checkPins(diags, layers, stages, c.balance, (l) => layerSpan(l) ?? fallbackSpan);
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

