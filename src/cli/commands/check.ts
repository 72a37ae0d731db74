// `fsm check FILE...`: parse and check files; exit 0 when clean (warnings allowed), 1 when any has errors.
import { hasErrors } from "../../diagnostics/diagnostic.js";
import { checkFile } from "../../check/check.js";
import { parseArgs } from "../args.js";
import type { CliIO } from "../io.js";
import { reportDiagnostics } from "../report.js";
import type { Command } from "./command.js";

export const checkCommand: Command = {
  name: "check",
  summary: "parse and check .fsm files, reporting every mistake",
  usage: `fsm check FILE... [--set KEY=VALUE]...

Parses each file (and its imports), checks names, types, shapes and settings, and
builds its graph. Diagnostics go to stderr. Exit code: 0 clean, 1 errors, 2 usage.

Options:
  --set KEY=VALUE   override a train/parallel setting, e.g. --set parallel.shard=fsdp (repeatable)
  -q, --quiet       print nothing when a file is clean`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "set", value: true, repeat: true }, { name: "quiet", short: "q" }]);
    if (args.positionals.length === 0) return -1;
    let failed = false;
    for (const file of args.positionals) {
      const result = checkFile(file, { overrides: args.flags.get("set") ?? [] });
      reportDiagnostics(io, result.diagnostics, result.sources);
      if (hasErrors(result.diagnostics)) failed = true;
      else if (!args.flags.has("quiet")) {
        const m = result.model;
        const what = m ? `model ${m.name}: ${m.graph.parameterCount().toLocaleString("en-US")} parameters, ${m.graph.layers().length} layers, ${m.graph.ops().length} ops` : "no model (a library of blocks)";
        io.stdout(`${file}: ok (${what})\n`);
      }
    }
    return failed ? 1 : 0;
  },
};
