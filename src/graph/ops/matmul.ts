// matmul(a, b): batched matrix product over the last two dims, [..., n, k] × [..., k, m] → [..., n, m].
import { dimEq } from "../dim.js";
import type { OpDef } from "../op-def.js";
import { typeToString } from "../types-format.js";
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
});
