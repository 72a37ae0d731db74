// `fsm schedule PLAN [--rank R]`: a plan's per-device action lists as text, read through the validating loader.
import { formatPlanPrograms } from "../../plan/listing.js";
import { integerFlag, parseArgs, UsageError } from "../args.js";
import type { CliIO } from "../io.js";
import { loadPlanOrReport } from "../load-plan.js";
import type { Command } from "./command.js";
import { plural } from "../../format/units.js";

export const scheduleCommand: Command = {
  name: "schedule",
  summary: "print a plan's action lists per device and stream",
  usage: `fsm schedule PLAN [--rank R]

Loads a plan written by 'fsm compile' (validating it) and prints each program's compute
and comm streams, one action per line with its predicted start and end and what it waits
for: whole actions, layers inside a compute action, or (gates) collectives a layer needs.
Data-parallel replicas of a pipeline stage share one program.
  --rank R   only the program rank R runs, with its pipeline peers resolved for R`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "rank", value: true }]);
    if (args.positionals.length !== 1) return -1;
    const rank = integerFlag(args, "rank", 0);
    const file = args.positionals[0]!;
    const plan = loadPlanOrReport(file, io);
    if (!plan) return 1;
    if (rank !== undefined && rank >= plan.cluster.devices) {
      throw new UsageError(`--rank ${rank} is outside the plan's ${plural(plan.cluster.devices, "device")} (0..${plan.cluster.devices - 1})`);
    }
    io.stdout(formatPlanPrograms(plan, rank));
    return 0;
  },
};
