// `fsm graph FILE [--format text|dot|json]`: the checked model's forward graph IR.
import { checkFile } from "../../check/check.js";
import { graphToDot } from "../../graph/dot.js";
import { printGraph } from "../../graph/print.js";
import { graphSummary } from "../../graph/summary.js";
import { flag, parseArgs, UsageError } from "../args.js";
import type { CliIO } from "../io.js";
import { reportDiagnostics, reportNoModel } from "../report.js";
import type { Command } from "./command.js";

const FORMATS = ["text", "dot", "json"] as const;

export const graphCommand: Command = {
  name: "graph",
  summary: "print a model's graph as text, Graphviz DOT or JSON",
  usage: `fsm graph FILE [--format text|dot|json] [--json] [--set KEY=VALUE]...

Checks FILE and prints its forward graph: layers, ops with types, parameters.
  --format text   stable text form (default)
  --format dot    Graphviz DOT, one cluster per layer (dot -Tsvg)
  --format json   {model, parameters, ops, layers, ...}; --json is short for it`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "format", value: true }, { name: "json" }, { name: "set", value: true, repeat: true }]);
    if (args.positionals.length !== 1) return -1;
    const format = args.flags.has("json") ? "json" : (flag(args, "format") ?? "text");
    if (!(FORMATS as readonly string[]).includes(format)) throw new UsageError(`--format must be one of ${FORMATS.join(", ")}`);
    const result = checkFile(args.positionals[0]!, { overrides: args.flags.get("set") ?? [] });
    reportDiagnostics(io, result.diagnostics, result.sources);
    const m = result.model;
    if (!m) {
      reportNoModel(io, args.positionals[0]!, "print", result.diagnostics);
      return 1;
    }
    if (format === "json") io.stdout(JSON.stringify(graphSummary(m.graph), null, 2) + "\n");
    else if (format === "dot") io.stdout(graphToDot(m.graph));
    else io.stdout(printGraph(m.graph));
    return 0;
  },
};
