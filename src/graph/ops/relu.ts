// relu(x): ReLU activation max(x, 0), elementwise.
import type { OpDef } from "../op-def.js";
import { activationOp } from "./shape-rules.js";

export const relu: OpDef = activationOp("relu", "ReLU activation max(x, 0), elementwise.");
