// The op registry: every built-in op, listed once. Adding an op = one file in ops/ plus one line here.
import type { OpDef } from "./op-def.js";
import { add } from "./ops/add.js";
import { attention } from "./ops/attention.js";
import { cross_entropy } from "./ops/cross_entropy.js";
import { div } from "./ops/div.js";
import { embedding } from "./ops/embedding.js";
import { gelu } from "./ops/gelu.js";
import { layer_norm } from "./ops/layer_norm.js";
import { linear } from "./ops/linear.js";
import { matmul } from "./ops/matmul.js";
import { mse_loss } from "./ops/mse_loss.js";
import { mul } from "./ops/mul.js";
import { positions } from "./ops/positions.js";
import { relu } from "./ops/relu.js";
import { reshape } from "./ops/reshape.js";
import { rms_norm } from "./ops/rms_norm.js";
import { scale } from "./ops/scale.js";
import { silu } from "./ops/silu.js";
import { softmax } from "./ops/softmax.js";
import { sub } from "./ops/sub.js";
import { transpose } from "./ops/transpose.js";

const ALL: readonly OpDef[] = [
  add, attention, cross_entropy, div, embedding, gelu, layer_norm, linear, matmul, mse_loss,
  mul, positions, relu, reshape, rms_norm, scale, silu, softmax, sub, transpose,
].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

const BY_NAME: ReadonlyMap<string, OpDef> = new Map(ALL.map((d) => [d.name, d]));

export function getOp(name: string): OpDef | undefined {
  return BY_NAME.get(name);
}

/** Every op, sorted by name (the order of `fsm ops` and the generated reference). */
export function allOps(): readonly OpDef[] {
  return ALL;
}

export function opNames(): string[] {
  return ALL.map((d) => d.name);
}

export { withDefaults } from "./ops/shape-rules.js";
