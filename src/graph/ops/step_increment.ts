// step_increment(step): step + 1, the optimizer's step counter t (Adam's bias correction reads the new value).
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireScalar } from "./internal-rules.js";

export const step_increment: OpDef = defineInternalOp({
  name: "step_increment",
  summary: "The step counter plus one (an f32 scalar state, as torch keeps it); updates the counter in place.",
  inputs: ["step"],
  attrs: [],
  infer: ([step]) => requireScalar("step_increment", step!, "step") ?? step!,
});
