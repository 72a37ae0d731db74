// relu_grad(dy, y): dx = dy where the forward output y > 0, else 0 (reads the output, as PyTorch saves it).
import type { OpDef } from "../op-def.js";
import { activationGradOp } from "./internal-rules.js";

export const relu_grad: OpDef = activationGradOp("relu_grad", "Input gradient of relu from the forward output: dy · (y > 0).", "y");
