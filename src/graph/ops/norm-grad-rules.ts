// Shape rules shared by the layer_norm and rms_norm gradient ops: dy and x agree, and the scale is [d].
import { dimEq } from "../dim.js";
import type { OpCheckError } from "../op-def.js";
import type { TensorType } from "../types.js";
import { typeToString } from "../types-format.js";
import { requireSameShape } from "./internal-rules.js";
import { opError } from "./shape-rules.js";

/** The input-gradient rule: dy and x of one shape, weight [d] with d = x's last dim; dx has x's type. */
export function normGradInput(op: string, dy: TensorType, x: TensorType, w: TensorType): TensorType | OpCheckError {
  const bad = requireSameShape(op, dy, x);
  if (bad) return bad;
  const d = x.shape[x.shape.length - 1];
  if (d === undefined || w.shape.length !== 1 || !dimEq(w.shape[0]!, d)) {
    return opError("FSM402", `${op}: weight ${typeToString(w)} does not match ${typeToString(x)}`);
  }
  return x;
}

/** The weight-gradient rule: dy and x of one shape; the gradient is f32[d], d = x's last dim. */
export function normGradWeight(op: string, dy: TensorType, x: TensorType): TensorType | OpCheckError {
  const bad = requireSameShape(op, dy, x);
  if (bad) return bad;
  const d = x.shape[x.shape.length - 1];
  return d === undefined ? opError("FSM404", `${op}: x must have a last dimension`) : { dtype: dy.dtype, shape: [d] };
}
