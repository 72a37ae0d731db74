// `fsm calibrate PLAN [-o FILE] [--repeats N]`: measures this machine's op times for the plan's shapes with
// the native kernels and writes them as a calibration file for `fsm compile --calibration FILE`.
import { writeAtomically } from "../../plan/serialize.js";
import { CalibrateError, calibratePlan } from "../../runtime/calibrate.js";
import { checkWritableFile } from "../../files/path-kind.js";
import { flag, integerFlag, parseArgs } from "../args.js";
import type { CliIO } from "../io.js";
import { loadPlanOrReport } from "../load-plan.js";
import type { Command } from "./command.js";

export const calibrateCommand: Command = {
  name: "calibrate",
  summary: "measure this machine's op times for a plan's shapes into a calibration file",
  usage: `fsm calibrate PLAN [-o FILE] [--repeats N]

Runs one micro-batch of the plan's training graph op by op with the native kernels
(realistic operands: the synthetic data and initial weights), times each op N times
(default 5) and keeps the median, and writes the calibration file (default
calibration.json) that 'fsm compile --cluster cpu --calibration FILE' reads in place of
the cpu profile's estimates. The plan must be compiled for --cluster cpu in fp32.
  -o, --output FILE   where to write (default calibration.json)
  --repeats N         timed runs per op (default 5)`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [
      { name: "output", short: "o", value: true },
      { name: "repeats", value: true },
    ]);
    if (args.positionals.length !== 1) return -1;
    const repeats = integerFlag(args, "repeats") ?? 5;
    const file = args.positionals[0]!;
    const out = flag(args, "output") ?? "calibration.json";
    // Before the measuring, which takes a while: where the file goes must be a file we can write.
    checkWritableFile(out, "-o");
    const plan = loadPlanOrReport(file, io);
    if (!plan) return 1;
    try {
      const cal = calibratePlan(plan, repeats);
      const bytes = writeAtomically(out, JSON.stringify(cal, null, 1) + "\n");
      io.stdout(`calibrated ${cal.ops.length} op shapes on ${cal.machine}; wrote ${out} (${bytes} bytes)\n`);
      return 0;
    } catch (e) {
      if (e instanceof CalibrateError) {
        io.stderr(`${file}: error: ${e.message}\n`);
        return 1;
      }
      throw e;
    }
  },
};
