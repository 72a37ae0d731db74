// add(a, b): elementwise a + b with NumPy broadcasting (the checker lowers the `+` operator on tensors to it).
import type { OpDef } from "../op-def.js";
import { binaryOp } from "./shape-rules.js";

export const add: OpDef = binaryOp("add", "Elementwise a + b with broadcasting; operands share a dtype.");
