// matmul(a, b): batched matrix product over the last two dims, [..., n, k] × [..., k, m] → [..., n, m].
import { dimEq, evalDim, numelDim } from "../dim.js";
import { reduceTo } from "../backward-rule.js";
import type { OpDef } from "../op-def.js";
import { DTYPE_BYTES } from "../types.js";
import { typeToString } from "../types-format.js";
import { matmulFlops, sumBytes } from "./cost-rules.js";
import { broadcastShapes, defineOp, firstError, opError, requireFloat, requireMinRank, requireSameDType } from "./shape-rules.js";

export const matmul: OpDef = defineOp({
  name: "matmul",
  kind: "function",
  summary: "Batched matrix product over the last two dims; leading (batch) dims broadcast.",
  inputs: ["a", "b"],
  attrs: [],
  infer([a, b]) {
    const bad = firstError(
      requireMinRank("matmul", a!, 2, "a"),
      requireMinRank("matmul", b!, 2, "b"),
      requireFloat("matmul", a!, "a"),
      requireSameDType("matmul", a!, b!),
    );
    if (bad) return bad;
    const [ra, rb] = [a!.shape.length, b!.shape.length];
    if (!dimEq(a!.shape[ra - 1]!, b!.shape[rb - 2]!)) {
      return opError("FSM402", `matmul inner dimensions differ: ${typeToString(a!)} × ${typeToString(b!)}`);
    }
    const batch = broadcastShapes(a!.shape.slice(0, -2), b!.shape.slice(0, -2));
    if (!batch) return opError("FSM402", `matmul cannot broadcast the batch dimensions of ${typeToString(a!)} and ${typeToString(b!)}`);
    return { dtype: a!.dtype, shape: [...batch, a!.shape[ra - 2]!, b!.shape[rb - 1]!] };
  },
  // 2·n·k·m per entry of the broadcast batch; backward computes dA = dY·Bᵀ and dB = Aᵀ·dY, one such product
  // each, and both operands are activations, so all of it is input gradient.
  cost([a, b], _attrs, bindings) {
    const [ra, rb] = [a!.shape.length, b!.shape.length];
    const batchShape = broadcastShapes(a!.shape.slice(0, -2), b!.shape.slice(0, -2));
    if (!batchShape) throw new Error("internal: matmul cost of batch dimensions that do not broadcast");
    const batch = evalDim(numelDim(batchShape), bindings);
    const [n, k, m] = [a!.shape[ra - 2]!, a!.shape[ra - 1]!, b!.shape[rb - 1]!].map((d) => evalDim(d, bindings)) as [number, number, number];
    const flops = batch * matmulFlops(n, k, m);
    return {
      forwardFlops: flops,
      backwardFlops: { input: 2 * flops, weight: 0 },
      bytesRead: sumBytes([a!, b!], bindings),
      bytesWritten: batch * n * m * DTYPE_BYTES[a!.dtype],
      unit: "matrix",
    };
  },
  // dA = dY·Bᵀ and dB = Aᵀ·dY, each summed over the batch dims it was broadcast along; both operands are
  // activations, so both are input gradients.
  backward: ({ inputs: [a, b], dy, wants }, e) => [
    wants[0] ? reduceTo(e, e.input("matmul", [dy, e.input("transpose", [b!], { dim0: -1, dim1: -2 })]), e.type(a!).shape) : undefined,
    wants[1] ? reduceTo(e, e.input("matmul", [e.input("transpose", [a!], { dim0: -1, dim1: -2 }), dy]), e.type(b!).shape) : undefined,
  ],
});
