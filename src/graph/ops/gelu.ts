// gelu(x): GELU activation x·Φ(x), elementwise.
import type { OpDef } from "../op-def.js";
import { activationOp } from "./shape-rules.js";

export const gelu: OpDef = activationOp("gelu", "GELU activation x·Φ(x), elementwise.");
