// The shape of one CLI command: name, help text, and a run that returns the exit code (-1 = print usage, exit 2).
import type { CliIO } from "../io.js";

export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  run(argv: readonly string[], io: CliIO): number | Promise<number>;
}
