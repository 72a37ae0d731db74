// silu_grad(dy, x): dx = dy·σ(x)·(1 + x·(1 − σ(x))), the derivative of x·σ(x).
import type { OpDef } from "../op-def.js";
import { activationGradOp } from "./internal-rules.js";

export const silu_grad: OpDef = activationGradOp("silu_grad", "Input gradient of silu from the forward input: dy · σ(x)·(1 + x·(1 − σ(x))).", "x");
