// `fsm calibrate PLAN [-o FILE] [--repeats N] [--devices N]`: measures this machine's op times for the plan's
// shapes, the executor's overheads and the in-process communicator in the native executor, and writes them as
// a calibration file for `fsm compile --calibration FILE`.
import { writeAtomically } from "../../plan/serialize.js";
import { CalibrateError, calibratePlan } from "../../runtime/calibrate.js";
import { checkWritableFile } from "../../files/path-kind.js";
import { flag, integerFlag, parseArgs } from "../args.js";
import type { CliIO } from "../io.js";
import { loadPlanOrReport } from "../load-plan.js";
import type { Command } from "./command.js";

export const calibrateCommand: Command = {
  name: "calibrate",
  summary: "measure this machine's op times, executor overheads and collectives into a calibration file",
  usage: `fsm calibrate PLAN [-o FILE] [--repeats N] [--devices N]

Runs one micro-batch of the plan's training graph (every micro-batch size the search
may pick, interleaved) in the native executor with realistic operands (the synthetic
data and initial weights), on one device with one core and with every core, and keeps
each op's median of N timed runs (default 5; more while they take under a quarter
of a second, up to 200, for small models). It also measures, for 1..4 devices and
the powers of 2 up to D: the executor's fixed cost per step, how much slower that many
devices compute at once than one alone (the virtual devices of a run share the
machine's cores, whose count it records), and the in-process communicator's
collectives (latency and bandwidth per kind and group size); and the executor's
dispatch per instruction, the hand-off each collective pays between a device's compute
and communication threads, and the run loop's own work per step (making the batch, which
it does while the devices run the step before, apart). Writes the calibration
file (default calibration.json) that 'fsm compile --cluster cpu --calibration FILE'
reads in place of the cpu profile's estimates. The plan must be compiled for
--cluster cpu in fp32.
  -o, --output FILE   where to write (default calibration.json)
  --repeats N         timed runs per measurement (default 5)
  --devices D         the most devices runs will have (default max(4, cores))`,
  async run(argv: readonly string[], io: CliIO): Promise<number> {
    const args = parseArgs(argv, [
      { name: "output", short: "o", value: true },
      { name: "repeats", value: true },
      { name: "devices", value: true },
    ]);
    if (args.positionals.length !== 1) return -1;
    const repeats = integerFlag(args, "repeats") ?? 5;
    const devices = integerFlag(args, "devices");
    const file = args.positionals[0]!;
    const out = flag(args, "output") ?? "calibration.json";
    // Before the measuring, which takes a while: where the file goes must be a file we can write.
    checkWritableFile(out, "-o");
    const plan = loadPlanOrReport(file, io);
    if (!plan) return 1;
    try {
      const cal = await calibratePlan(plan, { repeats, ...(devices !== undefined && { devices }) });
      const bytes = writeAtomically(out, JSON.stringify(cal, null, 1) + "\n");
      const us = (s: number): string => `${(s * 1e6).toFixed(1)} µs`;
      const steps = cal.host.step.map((x) => `${x.devices}: ${us(x.seconds)}`).join(", ");
      io.stdout(`calibrated ${cal.ops.length} op shapes on ${cal.machine}; wrote ${out} (${bytes} bytes)\n`);
      io.stdout(`  ${cal.cores} cores shared by the devices; dispatch ${us(cal.host.instructionSeconds)} per instruction; a step on devices that compute nothing, by devices ${steps}${cal.host.blockingStep ? ` (blocking: ${cal.host.blockingStep.map((x) => `${x.devices}: ${us(x.seconds)}`).join(", ")})` : ""} (of it the run loop's feeding and losses ${us(cal.host.loopSeconds)}, the next batch ${us(cal.host.batchSeconds ?? 0)}); hand-off ${us(cal.host.handoffSeconds)} per collective\n`);
      io.stdout(`  devices computing at once: ${cal.contention.map((c) => `${c.devices}: ${c.slowdown.toFixed(2)}× slower`).join(", ")}\n`);
      for (const c of cal.collectives) io.stdout(`  ${c.kind} over ${c.ranks}: ${us(c.latencySeconds)} + ${c.secondsPerByte > 0 ? (1e-9 / c.secondsPerByte).toFixed(2) : "∞"} GB/s\n`);
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
