// silu(x): SiLU (swish) activation x·sigmoid(x), elementwise.
import type { OpDef } from "../op-def.js";
import { activationOp } from "./shape-rules.js";

export const silu: OpDef = activationOp("silu", "SiLU (swish) activation x·sigmoid(x), elementwise.");
