// scale(x, factor): a tensor times a number; the checker lowers `x * 0.5` and `x / 2` to it.
import type { OpDef } from "../op-def.js";
import { ELEMENTWISE_FLOPS, elementwiseCost } from "./cost-rules.js";
import { defineOp, num, opError, requireFloat } from "./shape-rules.js";

export const scale: OpDef = defineOp({
  name: "scale",
  kind: "function",
  summary: "Multiplies a float tensor by a constant; output has the input's type.",
  inputs: ["x"],
  attrs: [{ name: "factor", type: "float", doc: "The constant multiplier." }],
  validate(attrs) {
    const f = num(attrs, "factor");
    return Number.isFinite(f) ? undefined : opError("FSM409", `scale: 'factor' must be finite, got ${f}`);
  },
  infer: ([x]) => requireFloat("scale", x!) ?? x!,
  cost: elementwiseCost(ELEMENTWISE_FLOPS.scale),
  backward: ({ dy, attrs }, e) => [e.input("scale", [dy], { factor: num(attrs, "factor") })],
});
