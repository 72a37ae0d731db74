// Load-time validation of a whole plan: types of every field, then references between sections (stages,
// ranks, tensors, actions, buffers), each failure a PlanError with the JSON path of the offending value.
import { PRECISIONS, SCHEDULES, SHARD_STRATEGIES, CHECKPOINT_MODES } from "../check/settings-types.js";
import { PHASES } from "../graph/graph.js";
import { formatAction, parseAction, SHARD_KINDS } from "../schedule/action.js";
import {
  array,
  arrayOf,
  boolean,
  fail,
  field,
  ids,
  integer,
  key,
  nonNegative,
  number,
  object,
  oneOf,
  string,
  tuple,
  type Json,
} from "./json-check.js";
import { BUFFER_KINDS, MESH_AXES, PLAN_FORMAT, PLAN_VERSION, type Plan } from "./plan.js";
import { checkGraph } from "./validate-graph.js";

const positive = (v: Json, p: string) => integer(v, p, 1, Infinity, "a positive integer");

/** Checks `v` (parsed JSON) and returns it typed; throws PlanError at the first problem. */
export function validatePlan(v: Json): Plan {
  const root = object(v, "");
  const format = field(root, "format", "");
  if (format !== PLAN_FORMAT) fail("format", `not an fsm plan: expected "${PLAN_FORMAT}", got ${JSON.stringify(format)}`);
  const version = integer(field(root, "version", ""), "version", 1, Infinity, "a plan version");
  if (version > PLAN_VERSION) fail("version", `plan version ${version} is newer than this fsm (${PLAN_VERSION}); upgrade fsm`);
  string(field(root, "fsm", ""), "fsm");

  const model = object(field(root, "model", ""), "model");
  string(field(model, "name", "model"), "model.name");
  string(field(model, "source", "model"), "model.source");
  integer(field(model, "parameters", "model"), "model.parameters");

  const cluster = object(field(root, "cluster", ""), "cluster");
  string(field(cluster, "profile", "cluster"), "cluster.profile");
  const devices = positive(field(cluster, "devices", "cluster"), "cluster.devices");
  positive(field(cluster, "nodes", "cluster"), "cluster.nodes");
  positive(field(cluster, "devicesPerNode", "cluster"), "cluster.devicesPerNode");
  nonNegative(field(cluster, "memoryBytes", "cluster"), "cluster.memoryBytes");

  const s = checkSettings(field(root, "settings", ""));
  if (s.pipe * s.data * s.tensor !== devices) {
    fail("settings.dataParallel", `stages × dataParallel${s.tensor > 1 ? " × tensorParallel" : ""} = ${s.pipe} × ${s.data}${s.tensor > 1 ? ` × ${s.tensor}` : ""} ≠ cluster.devices = ${devices}`);
  }
  checkMesh(field(root, "mesh", ""), s.pipe, s.data, s.tensor);
  const graph = checkGraph(field(root, "graph", ""), "graph");
  const settingsObj = object(root.settings!, "settings");
  if (settingsObj.recomputeLayers !== undefined) {
    const layers = arrayOf(settingsObj.recomputeLayers, "settings.recomputeLayers", (x, q) => integer(x, q, 0, graph.layers, "a layer index"));
    layers.forEach((l, i) => {
      if (i > 0 && l <= layers[i - 1]!) fail(`settings.recomputeLayers[${i}]`, "layers must be ascending and distinct");
    });
  }
  if (root.search !== undefined) checkSearch(root.search);
  if (root.run !== undefined) checkRun(root.run);
  const stageCount = s.pipe * s.virtual;
  const rank = (x: Json, p: string) => integer(x, p, 0, devices, "a rank");

  const stages = array(field(root, "stages", ""), "stages");
  if (stages.length !== stageCount) fail("stages", `expected ${stageCount} stages (stages × virtualStages), got ${stages.length}`);
  arrayOf(stages, "stages", (x, p, i) => {
    const o = object(x, p);
    integer(field(o, "index", p), key(p, "index"), i, i + 1, `the stage's own index ${i}`);
    integer(field(o, "pipeRank", p), key(p, "pipeRank"), 0, s.pipe, "a pipeline rank");
    const [first, last] = tuple(field(o, "layers", p), key(p, "layers"), 2);
    const lo = integer(first, `${key(p, "layers")}[0]`, 0, graph.layers, "a layer index");
    integer(last, `${key(p, "layers")}[1]`, lo, graph.layers, "a layer index at or after the first");
    arrayOf(field(o, "ranks", p), key(p, "ranks"), rank);
    ids(field(o, "sends", p), key(p, "sends"), graph.tensors, "a tensor id");
  });

  const shard = array(field(root, "shard", ""), "shard");
  if (shard.length !== stageCount) fail("shard", `expected one shard plan per stage (${stageCount}), got ${shard.length}`);
  arrayOf(shard, "shard", (x, p, i) => checkShard(x, p, i, rank, graph.layers, stageCount));
  const programs = array(field(root, "programs", ""), "programs");
  if (programs.length !== s.pipe) fail("programs", `expected one program per pipeline rank (${s.pipe}), got ${programs.length}`);
  const actionCounts = arrayOf(programs, "programs", (x, p, i) => checkProgram(x, p, i, { rank, stageCount, pipe: s.pipe, layers: graph.layers, devices }));

  const memory = array(field(root, "memory", ""), "memory");
  if (memory.length !== programs.length) fail("memory", `expected one memory plan per program (${programs.length}), got ${memory.length}`);
  arrayOf(memory, "memory", (x, p, i) => checkMemory(x, p, i, actionCounts[i]!, graph.layers, (programs[i] as { ranks: readonly Json[] }).ranks.length));

  const pred = object(field(root, "predicted", ""), "predicted");
  for (const k of ["stepTimeSeconds", "bubbleFraction", "exposedCommSeconds", "tokensPerSecond", "mfu", "flopsPerStep"]) {
    nonNegative(field(pred, k, "predicted"), `predicted.${k}`);
  }
  for (const k of ["peakMemoryBytes", "modelStateBytes"]) {
    const list = arrayOf(field(pred, k, "predicted"), `predicted.${k}`, nonNegative);
    if (list.length !== devices) fail(`predicted.${k}`, `expected one entry per device (${devices}), got ${list.length}`);
  }
  return v as Plan;
}

function checkSettings(v: Json): { pipe: number; data: number; tensor: number; virtual: number } {
  const o = object(v, "settings");
  const p = "settings";
  const pipe = positive(field(o, "stages", p), key(p, "stages"));
  const data = positive(field(o, "dataParallel", p), key(p, "dataParallel"));
  const tensor = positive(field(o, "tensorParallel", p), key(p, "tensorParallel"));
  if (o.sequenceParallel !== undefined && typeof o.sequenceParallel !== "boolean") fail(key(p, "sequenceParallel"), "expected true or false");
  const virtual = positive(field(o, "virtualStages", p), key(p, "virtualStages"));
  const m = positive(field(o, "microBatches", p), key(p, "microBatches"));
  const mbs = positive(field(o, "microBatchSize", p), key(p, "microBatchSize"));
  const batch = positive(field(o, "batch", p), key(p, "batch"));
  if (batch !== data * m * mbs) fail(key(p, "batch"), `batch ${batch} ≠ dataParallel × microBatches × microBatchSize = ${data * m * mbs}`);
  if (field(o, "seq", p) !== null) positive(o.seq, key(p, "seq"));
  oneOf(field(o, "schedule", p), key(p, "schedule"), SCHEDULES);
  oneOf(field(o, "checkpoint", p), key(p, "checkpoint"), CHECKPOINT_MODES);
  oneOf(field(o, "shard", p), key(p, "shard"), SHARD_STRATEGIES);
  boolean(field(o, "reshardAfterForward", p), key(p, "reshardAfterForward"));
  if (o.shardGroup !== undefined) {
    const g = positive(o.shardGroup, key(p, "shardGroup"));
    if (data % g !== 0) fail(key(p, "shardGroup"), `shard group ${g} does not divide dataParallel ${data}`);
  }
  if (o.noSync !== undefined) boolean(o.noSync, key(p, "noSync"));
  nonNegative(field(o, "bucketMB", p), key(p, "bucketMB"));
  if (o.fsdpPrefetch !== undefined) integer(o.fsdpPrefetch, key(p, "fsdpPrefetch"), 1, 64, "a prefetch depth");
  oneOf(field(o, "precision", p), key(p, "precision"), PRECISIONS);
  if (o.reduceDtype !== undefined) oneOf(o.reduceDtype, key(p, "reduceDtype"), PRECISIONS);
  string(field(o, "optimizer", p), key(p, "optimizer"));
  if (field(o, "clipGradNorm", p) !== null) nonNegative(o.clipGradNorm, key(p, "clipGradNorm"));
  return { pipe, data, tensor, virtual };
}

function checkRun(v: Json): void {
  const o = object(v, "run");
  positive(field(o, "steps", "run"), "run.steps");
  integer(field(o, "seed", "run"), "run.seed", 0, Number.MAX_SAFE_INTEGER, "a seed");
  if (o.lossScale !== undefined && o.lossScale !== "dynamic") positive(o.lossScale, "run.lossScale");
  const d = object(field(o, "data", "run"), "run.data");
  const kind = oneOf(field(d, "kind", "run.data"), "run.data.kind", ["synthetic", "tokens", "npy"]);
  if (kind === "tokens") {
    string(field(d, "path", "run.data"), "run.data.path");
    oneOf(field(d, "dtype", "run.data"), "run.data.dtype", ["u16", "u32"]);
  }
  if (kind === "npy") for (const [k, x] of Object.entries(object(field(d, "files", "run.data"), "run.data.files"))) string(x, `run.data.files.${k}`);
}

function checkSearch(v: Json): void {
  const o = object(v, "search");
  string(field(o, "chosen", "search"), "search.chosen");
  const candidates = arrayOf(field(o, "candidates", "search"), "search.candidates", (x, p) => {
    const c = object(x, p);
    string(field(c, "settings", p), key(p, "settings"));
    arrayOf(field(c, "set", p), key(p, "set"), string);
    arrayOf(field(c, "balance", p), key(p, "balance"), positive);
    arrayOf(field(c, "recomputeLayers", p), key(p, "recomputeLayers"), (y, q) => integer(y, q, 0, Infinity, "a layer index"));
    nonNegative(field(c, "estimatedStepSeconds", p), key(p, "estimatedStepSeconds"));
    if (field(c, "simulatedStepSeconds", p) !== null) nonNegative(c.simulatedStepSeconds, key(p, "simulatedStepSeconds"));
    nonNegative(field(c, "estimatedMemoryBytes", p), key(p, "estimatedMemoryBytes"));
    arrayOf(field(c, "stageSeconds", p), key(p, "stageSeconds"), nonNegative);
    return oneOf(field(c, "status", p), key(p, "status"), ["chosen", "alternative", "rejected"]);
  });
  if (candidates.filter((s) => s === "chosen").length !== 1) fail("search.candidates", "exactly one candidate must be chosen");
  arrayOf(field(o, "families", "search"), "search.families", (x, p) => {
    const f = object(x, p);
    string(field(f, "family", p), key(p, "family"));
  });
  const stats = object(field(o, "stats", "search"), "search.stats");
  for (const k of ["candidates", "evaluated", "pruned", "infeasible", "simulated", "seconds"]) nonNegative(field(stats, k, "search.stats"), `search.stats.${k}`);
  nonNegative(field(o, "plannedStepSeconds", "search"), "search.plannedStepSeconds");
  const scale = nonNegative(field(o, "memoryScale", "search"), "search.memoryScale");
  if (scale <= 0 || scale > 1) fail("search.memoryScale", `expected a fraction in (0, 1], got ${scale}`);
  if (o.overflowed !== undefined) arrayOf(o.overflowed, "search.overflowed", string);
  arrayOf(field(o, "neighbors", "search"), "search.neighbors", (x, p) => {
    const n = object(x, p);
    string(field(n, "setting", p), key(p, "setting"));
    string(field(n, "value", p), key(p, "value"));
    if (n.stepSeconds !== undefined) nonNegative(n.stepSeconds, key(p, "stepSeconds"));
    if (n.reason !== undefined) string(n.reason, key(p, "reason"));
  });
}

function checkMesh(v: Json, pipe: number, data: number, tensor: number): void {
  const o = object(v, "mesh");
  const axes = arrayOf(field(o, "axes", "mesh"), "mesh.axes", string);
  if (axes.join() !== MESH_AXES.join()) fail("mesh.axes", `expected [${MESH_AXES.join(", ")}], got [${axes.join(", ")}]`);
  const shape = arrayOf(field(o, "shape", "mesh"), "mesh.shape", positive);
  if (shape.join() !== [pipe, data, tensor].join()) fail("mesh.shape", `expected [${pipe}, ${data}, ${tensor}] (stages, dataParallel, tensorParallel), got [${shape.join(", ")}]`);
  string(field(o, "rank", "mesh"), "mesh.rank");
}

function checkPoint(v: Json, p: string, layers: number): void {
  const at = object(v, p);
  oneOf(field(at, "when", p), key(p, "when"), ["before", "after"]);
  oneOf(field(at, "phase", p), key(p, "phase"), PHASES);
  integer(field(at, "layer", p), key(p, "layer"), 0, layers, "a layer index");
  oneOf(field(at, "microBatch", p), key(p, "microBatch"), ["each", "first", "last"]);
}

function checkShard(v: Json, p: string, i: number, rank: (x: Json, p: string) => number, layers: number, stageCount: number): void {
  const o = object(v, p);
  integer(field(o, "stage", p), key(p, "stage"), i, i + 1, `the stage's own index ${i}`);
  oneOf(field(o, "strategy", p), key(p, "strategy"), SHARD_STRATEGIES);
  const group = arrayOf(field(o, "ranks", p), key(p, "ranks"), rank).length;
  const groupRank = (x: Json, q: string) => integer(x, q, 0, group, "a group rank");
  const bpp = object(field(o, "bytesPerParam", p), key(p, "bytesPerParam"));
  for (const k of ["param", "grad", "optimizer"]) nonNegative(field(bpp, k, key(p, "bytesPerParam")), key(key(p, "bytesPerParam"), k));
  arrayOf(field(o, "units", p), key(p, "units"), (u, q, j) => {
    const uo = object(u, q);
    integer(field(uo, "index", q), key(q, "index"), j, j + 1, `the unit's own index ${j}`);
    boolean(field(uo, "root", q), key(q, "root"));
    ids(field(uo, "layers", q), key(q, "layers"), layers, "a layer index");
    arrayOf(field(uo, "params", q), key(q, "params"), (m, r) => {
      const [name, offset, numel] = tuple(m, r, 3);
      string(name, `${r}[0]`);
      integer(offset, `${r}[1]`);
      integer(numel, `${r}[2]`);
    });
    for (const k of ["numel", "paddedNumel", "shardNumel"]) integer(field(uo, k, q), key(q, k));
  });
  for (const list of ["gradBuckets", "broadcastBuckets"]) {
    arrayOf(field(o, list, p), key(p, list), (b, q, j) => {
      const bo = object(b, q);
      integer(field(bo, "index", q), key(q, "index"), j, j + 1, `the bucket's own index ${j}`);
      if (bo.owner !== undefined) groupRank(bo.owner, key(q, "owner"));
      arrayOf(field(bo, "params", q), key(q, "params"), string);
      integer(field(bo, "numel", q), key(q, "numel"));
      nonNegative(field(bo, "bytes", q), key(q, "bytes"));
    });
  }
  const owners = object(field(o, "owners", p), key(p, "owners"));
  for (const [name, r] of Object.entries(owners)) groupRank(r, key(key(p, "owners"), name));
  arrayOf(field(o, "collectives", p), key(p, "collectives"), (c, q) => {
    const co = object(c, q);
    oneOf(field(co, "kind", q), key(q, "kind"), SHARD_KINDS);
    oneOf(field(co, "of", q), key(q, "of"), ["unit", "gradBucket", "broadcastBucket"]);
    integer(field(co, "unit", q), key(q, "unit"));
    nonNegative(field(co, "bytes", q), key(q, "bytes"));
    if (co.root !== undefined) rank(co.root, key(q, "root"));
    checkPoint(field(co, "at", q), key(q, "at"), layers);
  });
  arrayOf(field(o, "tied", p), key(p, "tied"), (x, q) => {
    const to = object(x, q);
    string(field(to, "param", q), key(q, "param"));
    integer(field(to, "unit", q), key(q, "unit"));
    nonNegative(field(to, "bytes", q), key(q, "bytes"));
    arrayOf(field(to, "stages", q), key(q, "stages"), (s, r) => integer(s, r, 0, stageCount, "a stage"));
    if (field(to, "order", q) !== null) oneOf(to.order, key(q, "order"), ["tiedFirst", "reductionFirst"]);
    checkPoint(field(to, "at", q), key(q, "at"), layers);
  });
  const state = arrayOf(field(o, "stateBytes", p), key(p, "stateBytes"), (x, q) => {
    const so = object(x, q);
    for (const k of ["param", "grad", "optimizer"]) nonNegative(field(so, k, q), key(q, k));
  });
  if (state.length !== group) fail(key(p, "stateBytes"), `expected one entry per group rank (${group}), got ${state.length}`);
  nonNegative(field(o, "zeroFormulaBytes", p), key(p, "zeroFormulaBytes"));
  if (o["partition"] !== undefined) {
    const q = key(p, "partition");
    const po = object(o["partition"], q);
    for (const k of ["largestShardBytes", "greedyLargestShardBytes"]) nonNegative(field(po, k, q), key(q, k));
  }
}

interface ProgramContext {
  readonly rank: (x: Json, p: string) => number;
  readonly stageCount: number;
  readonly pipe: number;
  readonly layers: number;
  readonly devices: number;
}

/** Returns the program's action count. */
function checkProgram(v: Json, p: string, i: number, c: ProgramContext): number {
  const o = object(v, p);
  integer(field(o, "id", p), key(p, "id"), i, i + 1, `the program's own index ${i}`);
  integer(field(o, "pipeRank", p), key(p, "pipeRank"), 0, c.pipe, "a pipeline rank");
  ids(field(o, "stages", p), key(p, "stages"), c.stageCount, "a stage");
  arrayOf(field(o, "ranks", p), key(p, "ranks"), c.rank);
  const actionsPath = key(p, "actions");
  const n = array(field(o, "actions", p), actionsPath).length;
  const actionId = (x: Json, q: string) => integer(x, q, 0, n, "an action id of this program");
  const streamOf = arrayOf(o.actions, actionsPath, (x, q, j) => {
    const a = object(x, q);
    integer(field(a, "id", q), key(q, "id"), j, j + 1, `the action's own index ${j}`);
    const text = string(field(a, "text", q), key(q, "text"));
    const parsed = parseAction(text);
    if (!parsed.ok) fail(key(q, "text"), parsed.message);
    if (formatAction(parsed.action) !== text) fail(key(q, "text"), `${JSON.stringify(text)} is not in canonical form`);
    if (parsed.action.stage >= c.stageCount) fail(key(q, "text"), `stage ${parsed.action.stage} is outside the plan's ${c.stageCount} stages`);
    if (parsed.action.peer !== undefined && parsed.action.peer >= c.devices) fail(key(q, "text"), `peer rank ${parsed.action.peer} is outside the ${c.devices} devices`);
    const stream = oneOf(field(a, "stream", q), key(q, "stream"), ["compute", "comm"]);
    arrayOf(field(a, "deps", q), key(q, "deps"), (d, r) => {
      if (actionId(d, r) === j) fail(r, "an action cannot depend on itself");
    });
    if (a.partial !== undefined) {
      arrayOf(a.partial, key(q, "partial"), (x2, r) => {
        const [act, layer] = tuple(x2, r, 2);
        actionId(act, `${r}[0]`);
        integer(layer, `${r}[1]`, 0, c.layers, "a layer index");
      });
    }
    if (a.gates !== undefined) {
      arrayOf(a.gates, key(q, "gates"), (x2, r) => {
        const [layer, act] = tuple(x2, r, 2);
        integer(layer, `${r}[0]`, 0, c.layers, "a layer index");
        actionId(act, `${r}[1]`);
      });
    }
    if (a.collective !== undefined) {
      const co = object(a.collective, key(q, "collective"));
      const cp = key(q, "collective");
      oneOf(field(co, "group", cp), key(cp, "group"), ["data", "tied", "world"]);
      oneOf(field(co, "of", cp), key(cp, "of"), ["unit", "gradBucket", "broadcastBucket", "tiedGrad", "gradNorm"]);
      nonNegative(field(co, "bytes", cp), key(cp, "bytes"));
    }
    const start = number(field(a, "start", q), key(q, "start"));
    const end = number(field(a, "end", q), key(q, "end"));
    if (end < start) fail(key(q, "end"), `ends (${end}) before it starts (${start})`);
    return stream;
  });
  const streams = object(field(o, "streams", p), key(p, "streams"));
  const seen = new Array<boolean>(n).fill(false);
  for (const name of ["compute", "comm"] as const) {
    const sp = key(key(p, "streams"), name);
    arrayOf(field(streams, name, key(p, "streams")), sp, (x, q) => {
      const id = actionId(x, q);
      if (seen[id]) fail(q, `action ${id} is listed twice`);
      if (streamOf[id] !== name) fail(q, `action ${id} belongs to the ${streamOf[id]} stream`);
      seen[id] = true;
    });
  }
  const missing = seen.indexOf(false);
  if (missing >= 0) fail(`${actionsPath}[${missing}]`, "the action is on no stream");
  return n;
}

/** A program's lowered arenas: one per replica, each holding at most its arena live. */
function checkRuntimeArenas(v: Json, p: string, replicas: number): void {
  const o = object(v, p);
  const arenas = arrayOf(field(o, "arenaBytes", p), key(p, "arenaBytes"), nonNegative);
  const live = arrayOf(field(o, "liveBytes", p), key(p, "liveBytes"), nonNegative);
  for (const [name, list] of [["arenaBytes", arenas], ["liveBytes", live]] as const) {
    if (list.length !== replicas) fail(key(p, name), `expected one entry per replica of the program (${replicas}), got ${list.length}`);
  }
  live.forEach((b, r) => {
    if (b > arenas[r]!) fail(`${key(p, "liveBytes")}[${r}]`, `the live bytes (${b}) exceed the arena (${arenas[r]})`);
  });
  if (o.reservedBytes !== undefined) {
    const reserved = arrayOf(o.reservedBytes, key(p, "reservedBytes"), nonNegative);
    if (reserved.length !== replicas) fail(key(p, "reservedBytes"), `expected one entry per replica of the program (${replicas}), got ${reserved.length}`);
  }
}

function checkMemory(v: Json, p: string, i: number, actions: number, layers: number, replicas: number): void {
  const o = object(v, p);
  integer(field(o, "program", p), key(p, "program"), i, i + 1, `the program's index ${i}`);
  const arena = nonNegative(field(o, "arenaBytes", p), key(p, "arenaBytes"));
  const peak = nonNegative(field(o, "peakBytes", p), key(p, "peakBytes"));
  if (peak > arena) fail(key(p, "peakBytes"), `the peak (${peak}) exceeds the arena (${arena})`);
  if (o.runtime !== undefined) checkRuntimeArenas(o.runtime, key(p, "runtime"), replicas);
  arrayOf(field(o, "buffers", p), key(p, "buffers"), (x, q) => {
    const b = object(x, q);
    string(field(b, "name", q), key(q, "name"));
    oneOf(field(b, "kind", q), key(q, "kind"), BUFFER_KINDS);
    const bytes = nonNegative(field(b, "bytes", q), key(q, "bytes"));
    const offset = nonNegative(field(b, "offset", q), key(q, "offset"));
    if (offset + bytes > arena) fail(key(q, "offset"), `the buffer [${offset}, ${offset + bytes}) runs past the arena (${arena} bytes)`);
    integer(field(b, "from", q), key(q, "from"), 0, actions, "an action id of the program");
    integer(field(b, "to", q), key(q, "to"), 0, actions, "an action id of the program");
    if (b.fromLayer !== undefined) integer(b.fromLayer, key(q, "fromLayer"), 0, layers, "a layer index");
    if (b.toLayer !== undefined) integer(b.toLayer, key(q, "toLayer"), 0, layers, "a layer index");
  });
}
