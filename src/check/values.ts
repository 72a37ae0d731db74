// Values the checker computes while evaluating constants, arguments, settings and forward code.
import type { Dim } from "../graph/dim.js";
import { dimToString, shapeToString } from "../graph/dim.js";
import type { TensorId } from "../graph/graph.js";
import type { TensorType } from "../graph/types.js";
import type { Instance } from "./instances.js";

export type Value =
  | { readonly k: "int"; readonly v: number }
  | { readonly k: "float"; readonly v: number }
  | { readonly k: "bool"; readonly v: boolean }
  | { readonly k: "str"; readonly v: string }
  /** An integer that involves the symbolic dims B or S (concrete integers are always `int`). */
  | { readonly k: "dim"; readonly d: Dim }
  | { readonly k: "tuple"; readonly items: readonly Value[] }
  | { readonly k: "list"; readonly items: readonly Value[] }
  /** A bare word used as an enum value: gelu, fsdp, 1f1b, u16, ... */
  | { readonly k: "word"; readonly name: string }
  | { readonly k: "auto" }
  | { readonly k: "tensor"; readonly t: TensorId; readonly type: TensorType }
  | { readonly k: "instance"; readonly inst: Instance }
  /** A parameter of a member, e.g. `wte.weight` (for `tie:`). */
  | { readonly k: "param"; readonly name: string; readonly type: TensorType }
  /** A constructor in settings: `adamw(lr: 3e-4)`, `tokens("x.bin")`. */
  | { readonly k: "ctor"; readonly name: string; readonly args: readonly NamedValue[] }
  /** The result of an expression that already produced a diagnostic: silently propagates, so one mistake
   * yields one message. */
  | { readonly k: "error" };

export interface NamedValue {
  readonly name?: string;
  readonly value: Value;
}

export const ERROR: Value = { k: "error" };

export function intV(v: number): Value {
  return { k: "int", v };
}

/** Human description used in type-mismatch messages. */
export function describe(v: Value): string {
  switch (v.k) {
    case "int":
      return `int ${v.v}`;
    case "float":
      return `float ${v.v}`;
    case "bool":
      return `bool ${v.v}`;
    case "str":
      return `string ${JSON.stringify(v.v)}`;
    case "dim":
      return `dimension ${dimToString(v.d)}`;
    case "tuple":
      return `tuple of ${v.items.length}`;
    case "list":
      return `list of ${v.items.length}`;
    case "word":
      return `name '${v.name}'`;
    case "auto":
      return "auto";
    case "tensor":
      return `tensor ${v.type.dtype}${shapeToString(v.type.shape)}`;
    case "instance":
      return `member '${v.inst.path}'`;
    case "param":
      return `parameter '${v.name}'`;
    case "ctor":
      return `${v.name}(...)`;
    case "error":
      return "<error>";
  }
}
