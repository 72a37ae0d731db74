// softmax_grad(dy, y){dim}: dx = y·(dy − Σ dy·y) along dim, from the forward output y.
import type { OpDef } from "../op-def.js";
import { defineInternalOp, requireSameShape } from "./internal-rules.js";
import { axisError, normalizeAxis, num } from "./shape-rules.js";

export const softmax_grad: OpDef = defineInternalOp({
  name: "softmax_grad",
  summary: "Input gradient of softmax from its output: y · (dy − Σ_dim dy·y).",
  inputs: ["dy", "y"],
  attrs: [{ name: "dim", type: "int", doc: "The forward op's dimension." }],
  infer([dy, y], attrs) {
    const axis = num(attrs, "dim");
    if (normalizeAxis(axis, y!.shape.length) === undefined) return axisError("softmax_grad", "dim", axis, y!);
    return requireSameShape("softmax_grad", dy!, y!) ?? dy!;
  },
});
