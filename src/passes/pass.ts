// The compiler pass contract: a named, pure, deterministic graph → graph function (DESIGN.md §4).
import type { TrainConfig } from "../check/settings-types.js";
import type { Graph } from "../graph/graph.js";

/** What every pass may read besides the graph: the checked settings of the model being compiled. */
export interface PassContext {
  /** The train section; passes that build the training step (autodiff) need it. */
  readonly train?: TrainConfig;
}

export interface Pass {
  /** File name, test folder and `--dump-after` name agree with it. */
  readonly name: string;
  /** One line for `--help` and the docs. */
  readonly summary: string;
  /** Returns a new graph (or the same one, unchanged); never mutates its input. */
  run(g: Graph, ctx: PassContext): Graph;
}
