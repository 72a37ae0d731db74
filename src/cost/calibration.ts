// Calibration files: what one machine measured on one date, replacing the profile's estimates. `fsm calibrate`
// writes them; this file defines the format, validates it on load, and builds the lookup keys. The pricing
// that uses them is calibrated-pricing.ts.
//
// Format (JSON, version 3; version 1 is version 3 with only `ops`, each op timed as a lone kernel; version 2's
// host.step was the executor's start and finish alone, read as that plus the loop and the batch, below):
//   {
//     "format": "fsm-calibration", "version": 3,
//     "profile": "cpu",                          // the device profile the numbers belong to (clusterFor checks)
//     "machine": "AMD EPYC, 2 vCPUs, host dev-1", // free text: what was measured
//     "date": "2025-01-31",                      // ISO 8601 date (a time may follow)
//     "cores": 2,                                // the cores the virtual devices of a run share
//     "ops": [
//       { "op": "linear",
//         "shape": "f32[256,32],f32[64,32],f32[64]|bias=true,in=32,out=64",   // see shapeKey()
//         "forwardSeconds": 1.1e-5, "backwardSeconds": 2.3e-5,   // a device with one core (one thread)
//         "backwardOps": 3,                                       // instructions of its backward
//         "allCores": { "forwardSeconds": 7e-6, "backwardSeconds": 1.4e-5 } }  // one device with every core
//     ],
//     "optimizer": { "stateBytes": 231264, "seconds": 3.1e-5, "allCoresSeconds": 2.9e-5, "ops": 12 },
//     "host": {
//       "instructionSeconds": 3e-7,              // the executor's dispatch between two instructions
//       "loopSeconds": 2e-5,                     // of an empty step, the run loop's feeding and loss reading
//       "batchSeconds": 5e-5,                    // of an empty step, making the next batch while the devices run
//       "handoffSeconds": 3e-5,                  // a collective's wake-ups between compute and comm threads
//       "step": [ { "devices": 1, "seconds": 4e-5 }, { "devices": 4, "seconds": 7e-5 } ], // an empty step
//       "blockingStep": [ { "devices": 1, "seconds": 5e-5 } ]  // optional: the same, taken blocking
//     },
//     "contention": [ { "devices": 1, "slowdown": 1 }, { "devices": 4, "slowdown": 2.1 } ],  // optional: devices
//                                                // computing at once, one thread each, against one alone
//     "collectives": [                           // the in-process communicator: seconds = latency + perByte·bytes
//       { "kind": "all_reduce", "ranks": 2, "latencySeconds": 1e-5, "secondsPerByte": 2e-10,
//         "samples": [ { "bytes": 4096, "seconds": 1.1e-5 } ] }
//     ]
//   }
// An op/shape pair appears at most once, a collective kind/ranks pair too. Ops not listed keep their estimate.
import { closeSync, readFileSync } from "node:fs";
import { openRegularFile, PathError } from "../files/path-kind.js";
import { evalDim, shapeToString, dim, type Dim } from "../graph/dim.js";
import type { DimBindings } from "../graph/op-cost.js";
import type { Attrs, AttrValue, TensorType } from "../graph/types.js";

export const CALIBRATION_FORMAT = "fsm-calibration";
export const CALIBRATION_VERSION = 3;
/** The versions this fsm reads (1: op times only; 2: host.step without the run loop's part). */
export const CALIBRATION_VERSIONS: readonly number[] = [1, 2, 3];

/** The collective kinds a calibration measures (src/cost/collectives.ts's names). */
export const CALIBRATED_COLLECTIVES = ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce", "send_recv"] as const;
export type CalibratedCollective = (typeof CALIBRATED_COLLECTIVES)[number];

export interface CalibrationEntry {
  readonly op: string;
  readonly shape: string;
  readonly forwardSeconds: number;
  readonly backwardSeconds: number;
  /** Version 2 on: the instructions its backward runs (each pays the executor's dispatch). */
  readonly backwardOps?: number;
  /** Version 2 on: the times on one device given every core (the other fields: one core). */
  readonly allCores?: { readonly forwardSeconds: number; readonly backwardSeconds: number };
}

export interface CollectiveFit {
  readonly kind: CalibratedCollective;
  /** The group size measured. */
  readonly ranks: number;
  /** seconds = latencySeconds + secondsPerByte · bytes (bytes as collectives.ts counts them). */
  readonly latencySeconds: number;
  readonly secondsPerByte: number;
  readonly samples: readonly { readonly bytes: number; readonly seconds: number }[];
}

export interface HostOverhead {
  /** The executor's cost between two instructions of a stream (dispatch, wait checks), seconds. */
  readonly instructionSeconds: number;
  /** Of an empty step (`step`), the run loop's feeding of the devices and reading of the losses, seconds. */
  readonly loopSeconds: number;
  /** Of an empty step, making the next batch, which the run loop does while the devices run: it hides device
   *  work where the devices leave the main thread a core of its own (calibrated-pricing.ts). Version-2 files
   *  without it counted it in loopSeconds. */
  readonly batchSeconds?: number;
  /** What each collective of a step pays on top of its back-to-back time: waking the communication thread
   *  when the compute stream's value is ready, and the compute thread when the result is. */
  readonly handoffSeconds: number;
  /** An empty step by device count: the run loop's whole step on devices whose programs do nothing (feeding
   *  each its rows, starting the run and hearing it finished, the next batch made meanwhile, the losses read;
   *  src/runtime/calibrate-loop.ts). */
  readonly step: readonly { readonly devices: number; readonly seconds: number }[];
  /** Version 3, optional: the same empty step taken blocking (the run on the loop's thread, the next batch
   *  made after it: src/runtime/step-mode.ts), which the run loop picks where it measures faster. */
  readonly blockingStep?: readonly { readonly devices: number; readonly seconds: number }[];
}

export interface OptimizerTiming {
  /** The model state the optimizer step reads and writes (parameters, gradients, optimizer state), bytes. */
  readonly stateBytes: number;
  /** Its update ops, one core; with every core. */
  readonly seconds: number;
  readonly allCoresSeconds: number;
  /** Instructions it ran. */
  readonly ops: number;
}

export interface Calibration {
  readonly profile: string;
  readonly machine: string;
  readonly date: string;
  /** Where it was read from (a path), for messages. */
  readonly origin: string;
  readonly entries: readonly CalibrationEntry[];
  /** `op` + "\0" + `shape` → entry. */
  readonly byKey: ReadonlyMap<string, CalibrationEntry>;
  /** Version 2 on (absent in version 1): the cores the devices share, the optimizer, the host's overheads and the
   *  communicator's collectives. */
  readonly cores?: number;
  readonly optimizer?: OptimizerTiming;
  readonly host?: HostOverhead;
  /** Measured: how much slower each of N devices computes, one thread each, when N compute at once (absent:
   *  max(1, N / cores)). */
  readonly contention?: readonly { readonly devices: number; readonly slowdown: number }[];
  readonly collectives?: readonly CollectiveFit[];
}

/** A malformed calibration file; the message names the file and the offending field. */
export class CalibrationError extends Error {}

/** The measured times of an op of this shape, if the calibration has them. */
export function calibrated(cal: Calibration | undefined, op: string, shape: string): CalibrationEntry | undefined {
  return cal?.byKey.get(`${op}\0${shape}`);
}

/**
 * The shape key of one op instance: its operand types at the device dtypes with symbols evaluated, then its
 * attributes sorted by name (dims evaluated, parameter references left out since a tie does not change the
 * work): `bf16[8192,768],bf16[3072,768],bf16[3072]|bias=true,in=768,out=3072`.
 */
export function shapeKey(inputs: readonly TensorType[], attrs: Attrs, b: DimBindings): string {
  const concrete = (d: Dim): Dim => dim(evalDim(d, b));
  const types = inputs.map((t) => `${t.dtype}${shapeToString(t.shape.map(concrete)).replace(/ /g, "")}`);
  const parts: string[] = [];
  for (const name of Object.keys(attrs).sort()) {
    const text = attrText(attrs[name]!, b);
    if (text !== undefined) parts.push(`${name}=${text}`);
  }
  return `${types.join(",")}|${parts.join(",")}`;
}

function attrText(v: AttrValue, b: DimBindings): string | undefined {
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "string") return String(v);
  if (Array.isArray(v)) return `[${(v as readonly Dim[]).map((d) => evalDim(d, b)).join(",")}]`;
  if ((v as { kind?: string }).kind === "ParamRef") return undefined;
  return String(evalDim(v as Dim, b));
}

/** A calibration belongs to the profile it was measured on: refused for any other (before any work). */
export function checkCalibrationProfile(cal: Calibration, profile: string): void {
  if (cal.profile !== profile) throw new CalibrationError(`calibration ${cal.origin} was measured on '${cal.profile}', not '${profile}'`);
}

export function loadCalibration(path: string): Calibration {
  let text: string;
  try {
    // Only a regular file: a FIFO would block the read, a directory fails it.
    const fd = openRegularFile(path, "calibration file");
    try {
      text = readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    throw new CalibrationError(`cannot read calibration file ${path}: ${e instanceof PathError ? e.reason : (e as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CalibrationError(`calibration file ${path} is not valid JSON: ${(e as Error).message}`);
  }
  return parseCalibration(json, path);
}

export function parseCalibration(json: unknown, origin: string): Calibration {
  const fail = (what: string): never => {
    throw new CalibrationError(`calibration ${origin}: ${what}`);
  };
  if (!isObject(json)) return fail("expected a JSON object");
  if (json.format !== CALIBRATION_FORMAT) fail(`'format' must be "${CALIBRATION_FORMAT}"`);
  if (!CALIBRATION_VERSIONS.includes(json.version as number)) fail(`'version' must be ${CALIBRATION_VERSIONS.slice(0, -1).join(", ")} or ${CALIBRATION_VERSIONS.at(-1)}, got ${JSON.stringify(json.version)}`);
  // Version 2 on: every field past `ops` (version 3 changed only what host.step measures).
  const full = json.version !== 1;
  const str = (key: string): string => {
    const v = json[key];
    return typeof v === "string" && v.length > 0 ? v : fail(`'${key}' must be a non-empty string`);
  };
  const [profile, machine, date] = [str("profile"), str("machine"), str("date")];
  const show = (v: unknown): string => JSON.stringify(v) ?? String(v);
  const seconds = (v: unknown, at: string): number =>
    typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : fail(`${at} must be a non-negative number of seconds, got ${show(v)}`);
  const count = (v: unknown, at: string, least: number): number =>
    typeof v === "number" && Number.isSafeInteger(v) && v >= least ? v : fail(`${at} must be an integer of at least ${least}, got ${show(v)}`);
  if (!/^\d{4}-\d{2}-\d{2}/.test(date)) fail(`'date' must be an ISO 8601 date (YYYY-MM-DD), got "${date}"`);
  if (!Array.isArray(json.ops)) return fail("'ops' must be an array");
  const entries: CalibrationEntry[] = [];
  const byKey = new Map<string, CalibrationEntry>();
  json.ops.forEach((e: unknown, i: number) => {
    const at = `ops[${i}]`;
    if (!isObject(e)) return fail(`${at} must be an object`);
    const { op, shape, forwardSeconds, backwardSeconds } = e;
    if (typeof op !== "string" || op === "") fail(`${at}.op must be a non-empty string`);
    if (typeof shape !== "string") fail(`${at}.shape must be a string`);
    for (const [k, v] of [["forwardSeconds", forwardSeconds], ["backwardSeconds", backwardSeconds]] as const) {
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0) fail(`${at}.${k} must be a non-negative number, got ${JSON.stringify(v) ?? String(v)}`);
    }
    // A measured op takes time (the timer counts nanoseconds): a zero forward time is no measurement, and would
    // price the op free (an MFU above 100%). A backward may be zero: an op with no gradient has none to time.
    if (forwardSeconds === 0) fail(`${at}.forwardSeconds is 0: a measured op takes some time (is the file a measurement, from 'fsm calibrate'?)`);
    let extra: Pick<CalibrationEntry, "backwardOps" | "allCores"> = {};
    if (full) {
      const backwardOps = count(e.backwardOps, `${at}.backwardOps`, 0);
      const all = e.allCores;
      if (!isObject(all)) return fail(`${at}.allCores must be an object {forwardSeconds, backwardSeconds}`);
      const allCores = { forwardSeconds: seconds(all.forwardSeconds, `${at}.allCores.forwardSeconds`), backwardSeconds: seconds(all.backwardSeconds, `${at}.allCores.backwardSeconds`) };
      extra = { backwardOps, allCores };
    }
    const entry: CalibrationEntry = { op: op as string, shape: shape as string, forwardSeconds: forwardSeconds as number, backwardSeconds: backwardSeconds as number, ...extra };
    const key = `${entry.op}\0${entry.shape}`;
    if (byKey.has(key)) fail(`${at} repeats op '${entry.op}' with shape '${entry.shape}'`);
    byKey.set(key, entry);
    entries.push(entry);
  });
  if (!full) return { profile, machine, date, origin, entries, byKey };
  const cores = count(json.cores, "'cores'", 1);
  const opt = json.optimizer;
  if (!isObject(opt)) return fail("'optimizer' must be an object {stateBytes, seconds, allCoresSeconds, ops}");
  const optimizer: OptimizerTiming = {
    stateBytes: count(opt.stateBytes, "optimizer.stateBytes", 0),
    seconds: seconds(opt.seconds, "optimizer.seconds"),
    allCoresSeconds: seconds(opt.allCoresSeconds, "optimizer.allCoresSeconds"),
    ops: count(opt.ops, "optimizer.ops", 0),
  };
  const h = json.host;
  if (!isObject(h)) return fail("'host' must be an object {instructionSeconds, loopSeconds, handoffSeconds, step}");
  const byDevices = (v: unknown, at: string): { devices: number; seconds: number }[] => {
    if (!Array.isArray(v) || v.length === 0) return fail(`${at} must be a non-empty array of {devices, seconds}`);
    const list = v.map((x: unknown, i: number) => {
      if (!isObject(x)) return fail(`${at}[${i}] must be an object {devices, seconds}`);
      return { devices: count(x.devices, `${at}[${i}].devices`, 1), seconds: seconds(x.seconds, `${at}[${i}].seconds`) };
    });
    list.forEach((x, i) => {
      if (i > 0 && x.devices <= list[i - 1]!.devices) fail(`${at}[${i}].devices must be larger than ${at}[${i - 1}]'s (${list[i - 1]!.devices}): ascending device counts`);
    });
    return list;
  };
  const step = byDevices(h.step, "host.step");
  const loopSeconds = seconds(h.loopSeconds, "host.loopSeconds");
  const batchSeconds = h.batchSeconds === undefined ? undefined : seconds(h.batchSeconds, "host.batchSeconds");
  const host: HostOverhead = {
    instructionSeconds: seconds(h.instructionSeconds, "host.instructionSeconds"),
    loopSeconds,
    ...(batchSeconds !== undefined && { batchSeconds }),
    handoffSeconds: seconds(h.handoffSeconds, "host.handoffSeconds"),
    // Version 2 measured the executor's start and finish alone: its empty step adds the loop, and the batch
    // where it took longer than they did (made while they ran).
    step: json.version === 2 ? step.map((x) => ({ devices: x.devices, seconds: loopSeconds + Math.max(x.seconds, batchSeconds ?? 0) })) : step,
    ...(h.blockingStep !== undefined && { blockingStep: byDevices(h.blockingStep, "host.blockingStep") }),
  };
  let contention: { devices: number; slowdown: number }[] | undefined;
  if (json.contention !== undefined) {
    if (!Array.isArray(json.contention) || json.contention.length === 0) return fail("'contention' must be a non-empty array of {devices, slowdown}");
    contention = json.contention.map((x: unknown, i: number) => {
      if (!isObject(x)) return fail(`contention[${i}] must be an object {devices, slowdown}`);
      const slowdown = x.slowdown;
      if (typeof slowdown !== "number" || !Number.isFinite(slowdown) || slowdown < 1) fail(`contention[${i}].slowdown must be a number of at least 1 (devices at once are never faster than one alone), got ${show(slowdown)}`);
      return { devices: count(x.devices, `contention[${i}].devices`, 1), slowdown: slowdown as number };
    });
    contention.forEach((x, i) => {
      if (i > 0 && x.devices <= contention![i - 1]!.devices) fail(`contention[${i}].devices must be larger than contention[${i - 1}]'s (${contention![i - 1]!.devices}): ascending device counts`);
    });
  }
  if (!Array.isArray(json.collectives)) return fail("'collectives' must be an array");
  const seen = new Set<string>();
  const collectives = json.collectives.map((c: unknown, i: number): CollectiveFit => {
    const at = `collectives[${i}]`;
    if (!isObject(c)) return fail(`${at} must be an object`);
    if (!(CALIBRATED_COLLECTIVES as readonly unknown[]).includes(c.kind)) fail(`${at}.kind must be one of ${CALIBRATED_COLLECTIVES.join(", ")}, got ${JSON.stringify(c.kind) ?? String(c.kind)}`);
    const ranks = count(c.ranks, `${at}.ranks`, 2);
    const key = `${c.kind as string}/${ranks}`;
    if (seen.has(key)) fail(`${at} repeats kind '${c.kind as string}' with ranks ${ranks}`);
    seen.add(key);
    if (!Array.isArray(c.samples)) return fail(`${at}.samples must be an array of {bytes, seconds}`);
    const samples = c.samples.map((x: unknown, k: number) => {
      if (!isObject(x)) return fail(`${at}.samples[${k}] must be an object {bytes, seconds}`);
      return { bytes: count(x.bytes, `${at}.samples[${k}].bytes`, 0), seconds: seconds(x.seconds, `${at}.samples[${k}].seconds`) };
    });
    return { kind: c.kind as CalibratedCollective, ranks, latencySeconds: seconds(c.latencySeconds, `${at}.latencySeconds`), secondsPerByte: seconds(c.secondsPerByte, `${at}.secondsPerByte`), samples };
  });
  return { profile, machine, date, origin, entries, byKey, cores, optimizer, host, ...(contention && { contention }), collectives };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
