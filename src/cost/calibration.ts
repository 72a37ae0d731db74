// Calibration files: measured seconds per op kind and shape, taken on one machine on one date, which replace
// the profile's roofline estimates wherever an op of that exact shape was measured. `fsm calibrate` (a later
// issue) writes them; this file defines the format, validates it on load, and builds the lookup keys.
//
// Format (JSON, version 1):
//   {
//     "format": "fsm-calibration", "version": 1,
//     "profile": "cpu",                          // the device profile the numbers belong to (clusterFor checks)
//     "machine": "AMD EPYC, 2 vCPUs, host dev-1", // free text: what was measured
//     "date": "2025-01-31",                      // ISO 8601 date (a time may follow)
//     "ops": [
//       { "op": "linear",
//         "shape": "f32[256,32],f32[64,32],f32[64]|bias=true,in=32,out=64",   // see shapeKey()
//         "forwardSeconds": 1.1e-5, "backwardSeconds": 2.3e-5 }
//     ]
//   }
// An op/shape pair appears at most once. Ops not listed keep their estimate.
import { closeSync, readFileSync } from "node:fs";
import { openRegularFile, PathError } from "../files/path-kind.js";
import { evalDim, shapeToString, dim, type Dim } from "../graph/dim.js";
import type { DimBindings } from "../graph/op-cost.js";
import type { Attrs, AttrValue, TensorType } from "../graph/types.js";

export const CALIBRATION_FORMAT = "fsm-calibration";
export const CALIBRATION_VERSION = 1;

export interface CalibrationEntry {
  readonly op: string;
  readonly shape: string;
  readonly forwardSeconds: number;
  readonly backwardSeconds: number;
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
  if (json.version !== CALIBRATION_VERSION) fail(`'version' must be ${CALIBRATION_VERSION}, got ${JSON.stringify(json.version)}`);
  const str = (key: string): string => {
    const v = json[key];
    return typeof v === "string" && v.length > 0 ? v : fail(`'${key}' must be a non-empty string`);
  };
  const [profile, machine, date] = [str("profile"), str("machine"), str("date")];
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
    const entry: CalibrationEntry = { op: op as string, shape: shape as string, forwardSeconds: forwardSeconds as number, backwardSeconds: backwardSeconds as number };
    const key = `${entry.op}\0${entry.shape}`;
    if (byKey.has(key)) fail(`${at} repeats op '${entry.op}' with shape '${entry.shape}'`);
    byKey.set(key, entry);
    entries.push(entry);
  });
  return { profile, machine, date, origin, entries, byKey };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
