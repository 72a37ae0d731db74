// sgd_update(param, grad, [momentum_buffer], [clip]): one step of torch.optim.SGD (dampening 0) in place.
import type { OpDef } from "../op-def.js";
import type { TensorType } from "../types.js";
import { defineInternalOp, requireSameShape, requireScalar } from "./internal-rules.js";
import { bool, firstError, num } from "./shape-rules.js";

export const sgd_update: OpDef = defineInternalOp({
  name: "sgd_update",
  summary: "SGD step: g = grad·clip + wd·p; buf = μ·buf + g; p −= lr·(nesterov ? g + μ·buf : buf). Outputs the new param (and buffer).",
  inputs: ["param", "grad", "momentum_buffer", "clip"],
  inputsFor: (attrs) => [
    "param",
    "grad",
    ...(num(attrs, "momentum") !== 0 ? ["momentum_buffer"] : []),
    ...(bool(attrs, "clip") ? ["clip"] : []),
  ],
  attrs: [
    { name: "lr", type: "float", doc: "Learning rate." },
    { name: "momentum", type: "float", default: 0, doc: "Momentum factor μ; 0 keeps no buffer." },
    { name: "weight_decay", type: "float", default: 0, doc: "L2 penalty added to the gradient." },
    { name: "nesterov", type: "bool", default: false, doc: "Nesterov momentum." },
    { name: "clip", type: "bool", default: false, doc: "Read a clipping factor that scales the gradient first." },
  ],
  outputs([param, grad, ...rest], attrs) {
    const hasBuf = num(attrs, "momentum") !== 0;
    const bad = firstError(
      requireSameShape("sgd_update", param!, grad!, "param and grad"),
      hasBuf ? requireSameShape("sgd_update", param!, rest[0]!, "param and momentum buffer") : undefined,
      bool(attrs, "clip") ? requireScalar("sgd_update", rest[rest.length - 1]!, "clip") : undefined,
    );
    if (bad) return bad;
    const out: TensorType[] = hasBuf ? [param!, rest[0]!] : [param!];
    return out;
  },
});
