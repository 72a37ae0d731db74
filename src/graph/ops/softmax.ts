// softmax(x, dim): normalizes exp(x) along one dimension (the last by default).
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { axisError, defineOp, normalizeAxis, num, requireFloat } from "./shape-rules.js";

export const softmax: OpDef = defineOp({
  name: "softmax",
  kind: "function",
  summary: "Softmax along one dimension; output has the input's type.",
  inputs: ["x"],
  attrs: [{ name: "dim", type: "int", default: -1, doc: "Dimension to normalize over; negative counts from the end." }],
  infer([x], attrs) {
    const bad = requireFloat("softmax", x!);
    if (bad) return bad;
    const axis = num(attrs, "dim");
    return normalizeAxis(axis, x!.shape.length) === undefined ? axisError("softmax", "dim", axis, x!) : x!;
  },
  cost: elementwiseCost(ELEMENTWISE_FLOPS.softmax),
  // Reads the output: y·(dy − Σ dy·y) needs nothing else.
  backward: ({ output, dy, attrs }, e) => [e.input("softmax_grad", [dy, output], { dim: num(attrs, "dim") })],
});
