// fsm's command-line entry: dispatches to commands, maps usage errors to exit 2, and keeps stack traces for
// internal bugs only (bad input is always a diagnostic).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UsageError } from "./args.js";
import { calibrateCommand } from "./commands/calibrate.js";
import { checkCommand } from "./commands/check.js";
import type { Command } from "./commands/command.js";
import { compileCommand } from "./commands/compile.js";
import { costCommand } from "./commands/cost.js";
import { explainCommand } from "./commands/explain.js";
import { graphCommand } from "./commands/graph.js";
import { runCommand } from "./commands/run.js";
import { scheduleCommand } from "./commands/schedule.js";
import { vizCommand } from "./commands/viz.js";
import { consolidateCommand } from "./commands/consolidate.js";
import { devicesCommand } from "./commands/devices.js";
import { PathError } from "../files/path-kind.js";
import type { CliIO } from "./io.js";

const COMMANDS: readonly Command[] = [checkCommand, graphCommand, costCommand, compileCommand, explainCommand, scheduleCommand, runCommand, calibrateCommand, consolidateCommand, vizCommand, devicesCommand];

/** The version from package.json, found by walking up from this file (src/ in tests, dist/src/ when built). */
export function version(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "fsm" && pkg.version) return pkg.version;
    } catch {
      // not here: keep walking up
    }
  }
  return "unknown";
}

function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return `fsm — compile .fsm models into partitioned training plans (FSDP, OSS/ShardedDDP, GPipe) and run them

Usage: fsm <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n")}

Run 'fsm <command> --help' for a command's options. 'fsm --version' prints the version.
`;
}

export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    io.stdout(overview());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-V") {
    io.stdout(`${version()}\n`);
    return 0;
  }
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    io.stderr(`fsm: unknown command '${name}'\n\n${overview()}`);
    return 2;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    io.stdout(`${cmd.usage}\n`);
    return 0;
  }
  try {
    const code = await cmd.run(rest, io);
    if (code === -1) {
      io.stderr(`usage: ${cmd.usage}\n`);
      return 2;
    }
    return code;
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(`fsm ${name}: ${e.message}\nusage: ${cmd.usage.split("\n")[0]}\n`);
      return 2;
    }
    // A path of the wrong kind (a directory for a file, a FIFO, /proc) is bad input, found before any work.
    if (e instanceof PathError) {
      io.stderr(`fsm ${name}: error: ${e.message}\n`);
      return 1;
    }
    io.stderr(`fsm ${name}: internal error (a bug in fsm, please report it): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 70;
  }
}
