// The instance tree: what each member of the model is after elaboration (op with attributes and parameter
// specs, block with its own members, or a repeat stack), with hierarchical paths like `layers.3.attn`.
import type { Span } from "../diagnostics/span.js";
import type { OpDef, ParamSpec } from "../graph/op-def.js";
import type { Attrs } from "../graph/types.js";
import type { BlockDecl } from "../parse/ast.js";
import type { Env } from "./env.js";

export interface Annotations {
  readonly stage?: number;
  /** Where `@stage(k)` was written. */
  readonly stageSpan?: Span;
  readonly checkpoint?: boolean;
  readonly fsdpUnit?: boolean;
}

export interface OpInstance {
  readonly kind: "op";
  readonly path: string;
  readonly def: OpDef;
  readonly attrs: Attrs;
  /** Parameters this instance creates (a tied one is listed in `tie` instead). */
  readonly params: readonly ParamSpec[];
  /** Every parameter of the op in its operand order, the tied one included: the op's `params` rule, asked
   *  once at elaboration (the graph builder needs them again for each of a deep model's instances). */
  readonly specs: readonly ParamSpec[];
  readonly tie?: { readonly local: string; readonly target: string };
  readonly annotations: Annotations;
  readonly span: Span;
}

export interface BlockInstance {
  readonly kind: "block";
  readonly path: string;
  readonly decl: BlockDecl;
  /** Block parameters and constants, for evaluating forward code. */
  readonly env: Env;
  readonly members: ReadonlyMap<string, Instance>;
  readonly annotations: Annotations;
  readonly span: Span;
}

export interface RepeatInstance {
  readonly kind: "repeat";
  readonly path: string;
  readonly items: readonly Instance[];
  readonly annotations: Annotations;
  readonly span: Span;
}

export type Instance = OpInstance | BlockInstance | RepeatInstance;

export function mergeAnnotations(a: Annotations, b: Annotations): Annotations {
  return { ...a, ...b };
}

/** Joins path segments: `''` + `wte` → `wte`, `layers` + `3` → `layers.3`. */
export function childPath(parent: string, name: string): string {
  return parent === "" ? name : `${parent}.${name}`;
}
