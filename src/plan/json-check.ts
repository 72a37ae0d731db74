// Typed reads of untrusted JSON with JSON paths in every failure (PlanError), for the plan loader.
import { PlanError } from "./plan-error.js";

export type Json = unknown;

export function key(path: string, k: string): string {
  return path === "" ? k : `${path}.${k}`;
}

export function index(path: string, i: number): string {
  return `${path}[${i}]`;
}

function describe(v: Json): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === "object") return "an object";
  return `${typeof v} ${String(v)}`;
}

export function fail(path: string, reason: string): never {
  throw new PlanError(path, reason);
}

export function object(v: Json, path: string): Record<string, Json> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(path, `expected an object, got ${describe(v)}`);
  return v as Record<string, Json>;
}

/** A required field of an object. */
export function field(o: Record<string, Json>, k: string, path: string): Json {
  if (!Object.prototype.hasOwnProperty.call(o, k)) fail(key(path, k), "missing");
  return o[k];
}

export function array(v: Json, path: string): readonly Json[] {
  if (!Array.isArray(v)) fail(path, `expected an array, got ${describe(v)}`);
  return v;
}

export function string(v: Json, path: string): string {
  if (typeof v !== "string") fail(path, `expected a string, got ${describe(v)}`);
  return v;
}

export function boolean(v: Json, path: string): boolean {
  if (typeof v !== "boolean") fail(path, `expected true or false, got ${describe(v)}`);
  return v;
}

export function number(v: Json, path: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) fail(path, `expected a number, got ${describe(v)}`);
  return v;
}

export function nonNegative(v: Json, path: string): number {
  const n = number(v, path);
  if (n < 0) fail(path, `expected a non-negative number, got ${n}`);
  return n;
}

/** An integer in [min, max) (max exclusive; omit for no upper bound). */
export function integer(v: Json, path: string, min = 0, max = Infinity, what = "an integer"): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) fail(path, `expected ${what}, got ${describe(v)}`);
  if (v < min || v >= max) fail(path, `${v} is out of range: expected ${what} in ${min}..${max === Infinity ? "" : max - 1}`);
  return v;
}

export function oneOf<T extends string>(v: Json, path: string, values: readonly T[]): T {
  const s = string(v, path);
  if (!(values as readonly string[]).includes(s)) fail(path, `expected one of ${values.join(", ")}, got ${JSON.stringify(s)}`);
  return s as T;
}

/** Each element checked by `each` with its own path. */
export function arrayOf<T>(v: Json, path: string, each: (x: Json, path: string, i: number) => T): T[] {
  return array(v, path).map((x, i) => each(x, index(path, i), i));
}

/** arrayOf for a plan's long arrays (a deep model's hundreds of thousands of ops and tensors), whose
 *  members' paths would cost more to build than the checks: `quick(x, i)` tests a member without paths, and
 *  only a member it does not pass is checked by `each`, which throws with the path or accepts it. So `quick`
 *  must pass nothing `each` refuses; what it cannot vouch for it leaves to `each`. */
export function everyOf(v: Json, path: string, quick: (x: Json, i: number) => boolean, each: (x: Json, path: string, i: number) => void): void {
  const a = array(v, path);
  for (let i = 0; i < a.length; i++) if (!quick(a[i], i)) each(a[i], index(path, i), i);
}

/** What integer() accepts, without a path. */
export const isInteger = (v: Json, min: number, max: number): boolean => typeof v === "number" && Number.isSafeInteger(v) && v >= min && v < max;

/** A list of integers in [min, max). */
export function ids(v: Json, path: string, max: number, what: string): number[] {
  return arrayOf(v, path, (x, p) => integer(x, p, 0, max, what));
}

/** A fixed-length tuple. */
export function tuple(v: Json, path: string, length: number): readonly Json[] {
  const a = array(v, path);
  if (a.length !== length) fail(path, `expected ${length} elements, got ${a.length}`);
  return a;
}
