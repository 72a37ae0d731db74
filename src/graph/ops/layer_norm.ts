// layer_norm(d, eps, bias): normalizes the last dimension to zero mean and unit variance, then scales/shifts.
import { dim } from "../dim.js";
import { reduceTo } from "../backward-rule.js";
import type { OpDef, ParamSpec } from "../op-def.js";
import { ELEMENTWISE_FLOPS, normCost } from "./cost-rules.js";
import { bool, defineOp, firstError, num, opError, requireFloat, requireLastDim, requirePositive } from "./shape-rules.js";

export const layer_norm: OpDef = defineOp({
  name: "layer_norm",
  kind: "module",
  summary: "Layer normalization over the last dimension (size d); output has the input's type.",
  inputs: ["x"],
  attrs: [
    { name: "d", type: "int", doc: "Size of the normalized (last) dimension." },
    { name: "eps", type: "float", default: 1e-5, doc: "Added to the variance for numerical stability." },
    { name: "bias", type: "bool", default: true, doc: "Learn an additive shift as well as the scale." },
  ],
  validate(attrs) {
    return firstError(
      requirePositive("layer_norm", attrs, ["d"]),
      num(attrs, "eps") > 0 ? undefined : opError("FSM409", `layer_norm: 'eps' must be positive, got ${num(attrs, "eps")}`),
    );
  },
  params(attrs) {
    const d = dim(num(attrs, "d"));
    const ps: ParamSpec[] = [{ name: "weight", shape: [d], init: "ones" }];
    if (bool(attrs, "bias")) ps.push({ name: "bias", shape: [d], init: "zeros" });
    return ps;
  },
  infer([x], attrs) {
    return firstError(requireFloat("layer_norm", x!), requireLastDim("layer_norm", x!, num(attrs, "d"))) ?? x!;
  },
  // Without a shift there is no add forward and no dβ reduction backward.
  cost(inputs, attrs, b) {
    const f = ELEMENTWISE_FLOPS.layer_norm;
    const shift = bool(attrs, "bias") ? 0 : 1;
    return normCost({ forward: f.forward - shift, backward: f.backward, weight: f.weight - shift })(inputs, attrs, b);
  },
  // The row statistics are recomputed from x in both gradient ops rather than saved (two floats per row).
  backward: ({ inputs: [x, w, b], dy, attrs, wants }, e) => [
    wants[0] ? e.input("layer_norm_grad_input", [dy, x!, w!], { eps: num(attrs, "eps") }) : undefined,
    wants[1] ? e.weight("layer_norm_grad_weight", [dy, x!], { eps: num(attrs, "eps") }) : undefined,
    b !== undefined && wants[2] ? reduceTo(e, dy, e.type(b).shape, "weight") : undefined,
  ],
});
