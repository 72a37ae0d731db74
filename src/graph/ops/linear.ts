// linear(in, out, bias, tie): y = x·Wᵀ + b over the last dimension, PyTorch layout (weight is [out, in]).
import { dim } from "../dim.js";
import { reduceTo } from "../backward-rule.js";
import type { OpDef, ParamSpec } from "../op-def.js";
import { bytesOf, elems, matmulFlops, sumBytes } from "./cost-rules.js";
import { bool, defineOp, firstError, num, paramAttr, requireFloat, requireLastDim, requirePositive } from "./shape-rules.js";

export const linear: OpDef = defineOp({
  name: "linear",
  kind: "module",
  summary: "Affine map over the last dimension: [..., in] → [..., out].",
  inputs: ["x"],
  attrs: [
    { name: "in", type: "int", doc: "Input features (size of x's last dimension)." },
    { name: "out", type: "int", doc: "Output features." },
    { name: "bias", type: "bool", default: true, doc: "Add a learned bias of size out." },
    { name: "tie", type: "param", optional: true, doc: "Use this existing [out, in] parameter as the weight (weight tying)." },
  ],
  tieParam: "weight",
  validate(attrs) {
    const bad = requirePositive("linear", attrs, ["in", "out"]);
    if (bad) return bad;
    const tie = paramAttr(attrs, "tie");
    if (!tie) return undefined;
    // The tie's shape is checked by the checker for every op with a tieParam; the dtype rule is linear's own.
    return requireFloat("linear", tie.type, "tied weight");
  },
  params(attrs) {
    const out = num(attrs, "out");
    // PyTorch nn.Linear's default U(±1/√in): keeps plain ReLU stacks (no residuals, no norms) trainable.
    const ps: ParamSpec[] = [{ name: "weight", shape: [dim(out), dim(num(attrs, "in"))], init: "uniform_fan_in" }];
    if (bool(attrs, "bias")) ps.push({ name: "bias", shape: [dim(out)], init: "zeros" });
    return ps;
  },
  infer([x], attrs) {
    const bad = firstError(requireFloat("linear", x!), requireLastDim("linear", x!, num(attrs, "in")));
    if (bad) return bad;
    return { dtype: x!.dtype, shape: [...x!.shape.slice(0, -1), dim(num(attrs, "out"))] };
  },
  // x·Wᵀ is 2·rows·in·out; backward dX = dY·W and dW = dYᵀ·x are one such product each, and the bias
  // adds one FLOP per output element forward and its gradient (a row sum of dY) one backward.
  cost(inputs, attrs, b) {
    const [x, , bias] = inputs;
    const [inF, outF] = [num(attrs, "in"), num(attrs, "out")];
    const rows = elems(x!, b) / inF;
    const mm = matmulFlops(rows, inF, outF);
    const biasFlops = bias ? rows * outF : 0;
    return {
      forwardFlops: mm + biasFlops,
      backwardFlops: { input: mm, weight: mm + biasFlops },
      bytesRead: sumBytes(inputs, b),
      bytesWritten: rows * bytesOf({ dtype: x!.dtype, shape: [dim(outF)] }, b),
      unit: "matrix",
    };
  },
  // dx = dy·W is on the critical path; dW = dyᵀ·x and db = Σ dy are weight gradients. A tied weight gets
  // its gradient from each use; autodiff sums them.
  backward: ({ inputs: [x, w, b], dy, wants }, e) => [
    wants[0] ? e.input("linear_grad_input", [dy, w!]) : undefined,
    wants[1] ? e.weight("linear_grad_weight", [dy, x!]) : undefined,
    b !== undefined && wants[2] ? reduceTo(e, dy, e.type(b).shape, "weight") : undefined,
  ],
});
