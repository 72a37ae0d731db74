// `fsm explain PLAN [--json]`: why the plan's settings were chosen — each family of pipeline depth × data
// parallelism, each other setting against its alternatives, the runners-up and the stage split — from what
// the plan records of the search (read through the validating loader).
import { explainPlan } from "../../search/explain.js";
import { parseArgs } from "../args.js";
import type { CliIO } from "../io.js";
import { loadPlanOrReport } from "../load-plan.js";
import type { Command } from "./command.js";

export const explainCommand: Command = {
  name: "explain",
  summary: "explain why a plan's parallel settings and stage split were chosen",
  usage: `fsm explain PLAN [--json]

Loads a plan written by 'fsm compile' and explains its choices: the best predicted step
time of every pipeline depth × data-parallel family (or why it cannot run), each other
setting (shard, schedule, checkpointing, micro-batches) against its other values with
the rest unchanged, the runners-up the pipeline simulator ranked, and the stage split.
Plans compiled with every setting given have no search to explain; the split still is.
  --json   print the plan's search record as JSON`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "json" }]);
    if (args.positionals.length !== 1) return -1;
    const file = args.positionals[0]!;
    const plan = loadPlanOrReport(file, io);
    if (!plan) return 1;
    if (args.flags.has("json")) io.stdout(JSON.stringify(plan.search ?? null, null, 2) + "\n");
    else io.stdout(explainPlan(plan).join("\n") + "\n");
    return 0;
  },
};
