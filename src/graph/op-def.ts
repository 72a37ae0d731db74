// The shape of one entry in the op registry. Adding an op = one file in src/graph/ops/ exporting an OpDef,
// listed once in registry.ts. Later phases extend the entry (FLOPs, bytes, backward rule) rather than
// keeping per-op tables elsewhere.
import type { BackwardRule } from "./backward-rule.js";
import type { Shape } from "./dim.js";
import type { OpCostRule } from "./op-cost.js";
import type { Attrs, AttrValue, TensorType } from "./types.js";

export type AttrType = "int" | "float" | "bool" | "str" | "enum" | "dim" | "shape" | "param";

export interface AttrSpec {
  readonly name: string;
  readonly type: AttrType;
  /** Absent ⇒ the attribute is required (unless `optional`). */
  readonly default?: AttrValue;
  /** The attribute may be omitted although it has no constant default: the op's rules resolve its absence
   *  (`kv_heads` falls back to `heads`; a missing `tie` means the op creates its own weight). */
  readonly optional?: boolean;
  /** For enum attributes: the allowed words (e.g. gelu | relu | silu). */
  readonly values?: readonly string[];
  /** One line for `fsm ops` and the grammar reference. */
  readonly doc: string;
  /** Set only by compiler passes (the tensor-parallel split's `parts`): .fsm source cannot give it, and the
   *  language reference does not list it, because no user-written op may claim to be a slice of another. */
  readonly passOnly?: true;
}

export interface ParamSpec {
  /** Local name inside the member, e.g. `weight`, `bias`, `qkv.weight`. */
  readonly name: string;
  readonly shape: Shape;
  /** How the runtime initializes it (documented; used by later issues). */
  readonly init: "normal" | "zeros" | "ones" | "uniform_fan_in";
}

/** A user-facing problem found by an op's rules; the checker turns it into a diagnostic at the call site. */
export interface OpCheckError {
  readonly code: "FSM401" | "FSM402" | "FSM403" | "FSM404" | "FSM408" | "FSM409";
  readonly message: string;
}

export interface OpDef {
  readonly name: string;
  /** `module`: declared as a member (`fc = linear(d, 4 * d)`) and owns parameters; called as `fc(x)`.
   *  `function`: called directly in forward code (`gelu(x)`), no parameters.
   *  `internal`: emitted only by compiler passes (gradients, optimizer updates); not callable from .fsm source. */
  readonly kind: "module" | "function" | "internal";
  readonly summary: string;
  /** Tensor operands, in call order. For a function op they are its first positional arguments;
   *  for a module op they are the arguments of the member call in forward. */
  readonly inputs: readonly string[];
  /** Module ops: constructor arguments. Function ops: arguments after the tensor operands. Positional order = list order. */
  readonly attrs: readonly AttrSpec[];
  /** Cross-attribute validation (e.g. heads must divide d); runs before params/infer. */
  validate?(attrs: Attrs): OpCheckError | undefined;
  /** Parameters owned by a module op for the given attributes (function ops: none). */
  params?(attrs: Attrs): readonly ParamSpec[];
  /** Name of the parameter that a `tie:` attribute replaces (e.g. linear ties its `weight`). */
  readonly tieParam?: string;
  /** Output type from input types; the shape rule. Messages name both shapes when they disagree. */
  infer(inputs: readonly TensorType[], attrs: Attrs): TensorType | OpCheckError;
  /** Internal ops whose operand list depends on attributes (an optional bias, a clip coefficient, a count of
   *  norms): the operand names for these attributes. Absent ⇒ `inputs`. */
  inputsFor?(attrs: Attrs): readonly string[];
  /** Ops with more than one output (internal ops only): every output type, in order; `infer` gives the first. */
  outputs?(inputs: readonly TensorType[], attrs: Attrs): readonly TensorType[] | OpCheckError;
  /** The gradient rule: emits the ops that compute each operand's gradient from the output's gradient, input
   *  gradients and weight gradients as separate ops (see backward-rule.ts). Absent on ops with no float
   *  gradient (positions) and on internal ops (the training graph is differentiated once). */
  backward?: BackwardRule;
  /** FLOPs (forward; backward split into input and weight gradients) and forward bytes at given symbol
   *  values; see op-cost.ts. Every forward op has one; internal (backward) ops are costed through theirs. */
  cost?: OpCostRule;
}

export function isOpCheckError(x: TensorType | OpCheckError): x is OpCheckError {
  return (x as OpCheckError).code !== undefined;
}

/** The operand names of an op for given attributes (see `inputsFor`). */
export function operandNames(def: OpDef, attrs: Attrs): readonly string[] {
  return def.inputsFor?.(attrs) ?? def.inputs;
}

/** Every output type of an op: `outputs` for multi-output ops, else the single type `infer` gives. */
export function inferOutputs(def: OpDef, inputs: readonly TensorType[], attrs: Attrs): readonly TensorType[] | OpCheckError {
  if (def.outputs) return def.outputs(inputs, attrs);
  const t = def.infer(inputs, attrs);
  return isOpCheckError(t) ? t : [t];
}
