// Rules shared by the internal ops (gradients, optimizer updates): the wrapper that registers one, and the
// shape checks their rules repeat. Their operands come from the autodiff pass, never from user code, so a
// failed check here means a compiler bug; the verifier re-runs these rules to catch one.
import { shapeEq } from "../dim.js";
import type { AttrSpec, OpCheckError, OpDef } from "../op-def.js";
import type { Attrs, TensorType } from "../types.js";
import { typeToString } from "../types-format.js";
import { opError, withDefaults } from "./shape-rules.js";

type InternalSpec = Omit<OpDef, "kind" | "infer" | "outputs" | "params" | "tieParam" | "backward"> &
  (
    | { infer(inputs: readonly TensorType[], attrs: Attrs): TensorType | OpCheckError; outputs?: undefined }
    | { outputs(inputs: readonly TensorType[], attrs: Attrs): readonly TensorType[] | OpCheckError; infer?: undefined }
  );

function isError(x: unknown): x is OpCheckError {
  return typeof x === "object" && x !== null && (x as OpCheckError).code !== undefined;
}

/**
 * Registers an internal op: its rules see declared defaults filled in, and a wrong operand count (against
 * `inputsFor` when the op has one) is reported before the op's own rule runs. A multi-output op states
 * `outputs`; `infer` is then derived as its first output.
 */
export function defineInternalOp(spec: InternalSpec): OpDef {
  const full = (attrs: Attrs): Attrs => withDefaults(spec.attrs, attrs);
  const arity = (inputs: readonly TensorType[], attrs: Attrs): OpCheckError | undefined => {
    const n = (spec.inputsFor?.(full(attrs)) ?? spec.inputs).length;
    return inputs.length === n ? undefined : opError("FSM401", `${spec.name} takes ${n} tensor operand${n === 1 ? "" : "s"}, got ${inputs.length}`);
  };
  const outputs = (inputs: readonly TensorType[], attrs: Attrs): readonly TensorType[] | OpCheckError => {
    const bad = arity(inputs, attrs);
    if (bad) return bad;
    if (spec.outputs) return spec.outputs(inputs, full(attrs));
    const t = spec.infer(inputs, full(attrs));
    return isError(t) ? t : [t];
  };
  const { validate, inputsFor } = spec;
  return {
    ...spec,
    kind: "internal",
    ...(validate && { validate: (attrs: Attrs) => validate(full(attrs)) }),
    ...(inputsFor && { inputsFor: (attrs: Attrs) => inputsFor(full(attrs)) }),
    infer(inputs, attrs) {
      const out = outputs(inputs, attrs);
      return isError(out) ? out : out[0]!;
    },
    ...(spec.outputs && { outputs }),
  };
}

/** FSM402 unless two operands have the same shape (a gradient and the value it belongs to). */
export function requireSameShape(op: string, a: TensorType, b: TensorType, what = "operands"): OpCheckError | undefined {
  return shapeEq(a.shape, b.shape) ? undefined : opError("FSM402", `${op}: ${what} differ in shape: ${typeToString(a)} and ${typeToString(b)}`);
}

/** FSM402 unless the operand is a scalar. */
export function requireScalar(op: string, t: TensorType, role: string): OpCheckError | undefined {
  return t.shape.length === 0 ? undefined : opError("FSM402", `${op}: ${role} must be a scalar, got ${typeToString(t)}`);
}

/**
 * An elementwise gradient dx = dy · f'(v) of an activation, where v is the forward input or output (the
 * op's name says which): the output has dy's type.
 */
export function activationGradOp(name: string, summary: string, saved: "x" | "y"): OpDef {
  return defineInternalOp({
    name,
    summary,
    inputs: ["dy", saved],
    attrs: [],
    infer: ([dy, v]) => requireSameShape(name, dy!, v!) ?? dy!,
  });
}

/** The `eps` attribute of the norm gradients, copied from the forward op. */
export const EPS_ATTR: AttrSpec = { name: "eps", type: "float", doc: "The forward op's epsilon (recomputes mean and scale)." };
