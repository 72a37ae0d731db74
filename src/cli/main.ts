// fsm's command-line entry: dispatches to commands, maps usage errors to exit 2, and keeps stack traces for
// internal bugs only (bad input is always a diagnostic).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UsageError } from "./args.js";
import type { Command } from "./commands/command.js";
import { PathError } from "../files/path-kind.js";
import type { CliIO } from "./io.js";

// Each command's module is loaded when that command runs (the overview loads them all): `fsm compile` need
// not load the runtime, checkpoints and the visualizer (239 modules instead of 320, some 50 ms of CPU time
// on every invocation).
const COMMANDS: readonly { readonly name: string; readonly load: () => Promise<Command> }[] = [
  { name: "check", load: async () => (await import("./commands/check.js")).checkCommand },
  { name: "graph", load: async () => (await import("./commands/graph.js")).graphCommand },
  { name: "cost", load: async () => (await import("./commands/cost.js")).costCommand },
  { name: "compile", load: async () => (await import("./commands/compile.js")).compileCommand },
  { name: "explain", load: async () => (await import("./commands/explain.js")).explainCommand },
  { name: "schedule", load: async () => (await import("./commands/schedule.js")).scheduleCommand },
  { name: "run", load: async () => (await import("./commands/run.js")).runCommand },
  { name: "calibrate", load: async () => (await import("./commands/calibrate.js")).calibrateCommand },
  { name: "consolidate", load: async () => (await import("./commands/consolidate.js")).consolidateCommand },
  { name: "viz", load: async () => (await import("./commands/viz.js")).vizCommand },
  { name: "devices", load: async () => (await import("./commands/devices.js")).devicesCommand },
];

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

async function overview(): Promise<string> {
  const commands = await Promise.all(COMMANDS.map((c) => c.load()));
  const width = Math.max(...commands.map((c) => c.name.length));
  return `fsm — compile .fsm models into partitioned training plans (FSDP, OSS/ShardedDDP, GPipe) and run them

Usage: fsm <command> [options]

Commands:
${commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n")}

Run 'fsm <command> --help' for a command's options. 'fsm --version' prints the version.
`;
}

export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    io.stdout(await overview());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-V") {
    io.stdout(`${version()}\n`);
    return 0;
  }
  const entry = COMMANDS.find((c) => c.name === name);
  if (!entry) {
    io.stderr(`fsm: unknown command '${name}'\n\n${await overview()}`);
    return 2;
  }
  const cmd = await entry.load();
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
