// The flat, ordered list of compiler passes and the loop that runs them (verifying after each on request).
import type { Graph } from "../graph/graph.js";
import { verifyGraph } from "../graph/verify.js";
import { autodiff } from "./autodiff.js";
import type { Pass, PassContext } from "./pass.js";

// Order: autodiff comes first because every later pass (cost, memory, partitioning) plans the training step.
export const PIPELINE: readonly Pass[] = [autodiff];

export interface PipelineOptions {
  /** Run verifyGraph after every pass and throw on the first broken invariant (`--verify-each`). */
  readonly verifyEach?: boolean;
  /** Called with each pass's result (`--dump-after=PASS`). */
  readonly after?: (pass: Pass, g: Graph) => void;
}

export function runPipeline(g: Graph, ctx: PassContext, options: PipelineOptions = {}, passes: readonly Pass[] = PIPELINE): Graph {
  let cur = g;
  for (const pass of passes) {
    cur = pass.run(cur, ctx);
    if (options.verifyEach) {
      const problems = verifyGraph(cur);
      if (problems.length > 0) throw new Error(`internal: the graph fails verification after pass '${pass.name}':\n${problems.join("\n")}`);
    }
    options.after?.(pass, cur);
  }
  return cur;
}
