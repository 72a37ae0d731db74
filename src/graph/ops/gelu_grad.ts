// gelu_grad(dy, x): dx = dy·(Φ(x) + x·φ(x)), the derivative of the exact (erf) GELU.
import type { OpDef } from "../op-def.js";
import { activationGradOp } from "./internal-rules.js";

export const gelu_grad: OpDef = activationGradOp("gelu_grad", "Input gradient of gelu from the forward input: dy · (Φ(x) + x·φ(x)).", "x");
