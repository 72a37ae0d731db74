// Value readers for settings: small combinators (int ranges, enums, `auto`) and the optimizer and data-source
// constructors (`adamw(lr: 3e-4)`, `tokens("x.bin", dtype: u16)`), each returning the value or why it is wrong.
import type { Auto, DataSource, Optimizer } from "./settings-types.js";
import { didYouMean } from "./suggest.js";
import { describe, type NamedValue, type Value } from "./values.js";

/** A reader turns a value into a setting, or returns the message of why it cannot. */
export type Reader<T> = (v: Value) => T | { readonly problem: string };

export const isProblem = (x: unknown): x is { problem: string } => typeof x === "object" && x !== null && "problem" in x;

export const intAtLeast =
  (min: number): Reader<number> =>
  (v) =>
    v.k === "int" && v.v >= min ? v.v : { problem: `must be an int >= ${min}, got ${describe(v)}` };
export const positiveNumber: Reader<number> = (v) =>
  (v.k === "int" || v.k === "float") && v.v > 0 ? v.v : { problem: `must be a number > 0, got ${describe(v)}` };
export const nonNegativeNumber: Reader<number> = (v) =>
  (v.k === "int" || v.k === "float") && v.v >= 0 ? v.v : { problem: `must be a number >= 0, got ${describe(v)}` };
export const bool: Reader<boolean> = (v) => (v.k === "bool" ? v.v : { problem: `must be true or false, got ${describe(v)}` });
export const word =
  <T extends string>(values: readonly T[]): Reader<T> =>
  (v) => {
    const w = v.k === "word" ? v.name : v.k === "str" ? v.v : undefined;
    if (w !== undefined && (values as readonly string[]).includes(w)) return w as T;
    const hint = w !== undefined ? didYouMean(w, values).map((s) => `; ${s}`).join("") : "";
    return { problem: `must be one of ${values.join(", ")}, got ${describe(v)}${hint}` };
  };
export const orAuto =
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

export const optimizer: Reader<Optimizer> = (v) => {
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

export const str: Reader<string> = (v) => (v.k === "str" ? v.v : { problem: `must be a string, got ${describe(v)}` });

export const dataSource: Reader<DataSource> = (v) => {
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

export const lossScale: Reader<"dynamic" | number> = (v) =>
  v.k === "word" && v.name === "dynamic" ? "dynamic" : positiveNumber(v);

export const balance: Reader<readonly number[]> = (v) =>
  (v.k === "list" || v.k === "tuple") && v.items.length > 0 && v.items.every((i) => i.k === "int" && i.v >= 1)
    ? v.items.map((i) => (i as { v: number }).v)
    : { problem: `must be a list of layer counts >= 1 such as [6, 6, 6, 6], got ${describe(v)}` };

