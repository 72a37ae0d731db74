// `fsm viz PLAN [-o FILE] [--format html|svg|dot|text] [--trace TRACE [--step N]]`: draws a plan (read through
// the validating loader) and, with a trace from `fsm run --trace`, its measured step beside the predicted one.
import { closeSync, readFileSync } from "node:fs";
import { extname } from "node:path";
import { writeAtomically } from "../../plan/serialize.js";
import type { Plan } from "../../plan/plan.js";
import { renderDot } from "../../viz/dot.js";
import { renderHtml } from "../../viz/html.js";
import { renderSvg } from "../../viz/svg.js";
import { renderText } from "../../viz/text.js";
import { measuredStep, parseTrace, TraceError, type MeasuredStep } from "../../viz/trace.js";
import { buildViewModel } from "../../viz/view-model.js";
import type { ViewModel } from "../../viz/view-types.js";
import { checkWritableFile, openRegularFile, PathError } from "../../files/path-kind.js";
import { flag, integerFlag, parseArgs, UsageError } from "../args.js";
import type { CliIO } from "../io.js";
import { loadPlanOrReport } from "../load-plan.js";
import type { Command } from "./command.js";
import { formatBytes } from "../../format/units.js";

const RENDERERS = { html: renderHtml, svg: renderSvg, dot: renderDot, text: renderText } as const satisfies Record<string, (vm: ViewModel) => string>;
type Format = keyof typeof RENDERERS;
const FORMATS = Object.keys(RENDERERS) as Format[];
const BY_EXTENSION: Readonly<Record<string, Format>> = { ".html": "html", ".htm": "html", ".svg": "svg", ".dot": "dot", ".gv": "dot", ".txt": "text" };

export const vizCommand: Command = {
  name: "viz",
  summary: "draw a plan: graph by stage, shard map, schedule timeline, memory (HTML, SVG, DOT, text)",
  usage: `fsm viz PLAN [-o FILE] [--format html|svg|dot|text] [--trace TRACE] [--step N]

Loads a plan written by 'fsm compile' (validating it) and draws it: the model graph with
layers colored by pipeline stage (repeated blocks collapsed) and FSDP units, a stage table
(layers, ranks, parameters, FLOPs, time, memory), the shard map (which rank holds which
part of weights, gradients and optimizer state), the schedule timeline (one row per
program: data-parallel replicas share one; compute and communication lanes, idle time
shaded), memory per device against its capacity, the summary numbers and, for a searched
plan, the alternatives considered.
  --format html   one self-contained page (inline CSS, SVG and script; opens offline)
  --format svg    the graph, timeline and memory chart as one SVG document
  --format dot    the partitioned graph in Graphviz DOT (dot -Tsvg)
  --format text   a compact terminal rendering: summary, stages, shards, text timeline
  -o FILE         write FILE; without --format, its extension picks the format (.html,
                  .svg, .dot/.gv, .txt; anything else: html)
  --trace TRACE   a Chrome trace from 'fsm run --trace': the measured step is drawn below
                  the predicted one on the same time scale (html, svg, text)
  --step N        the trace's step to draw (default: the last one every device ran)
Without -o the output goes to stdout (default format: html); HTML is not written to a
terminal: redirect it, give -o FILE.html, or use --format text.`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "output", short: "o", value: true }, { name: "format", value: true }, { name: "trace", value: true }, { name: "step", value: true }]);
    if (args.positionals.length !== 1) return -1;
    const out = flag(args, "output");
    const format = formatOf(flag(args, "format"), out);
    const tracePath = flag(args, "trace");
    const step = integerFlag(args, "step", 0, "a step number");
    if (step !== undefined && tracePath === undefined) throw new UsageError("--step picks a step of a trace: give --trace TRACE too");
    if (tracePath !== undefined && format === "dot") throw new UsageError("--trace draws a measured timeline, which the DOT graph has no place for: use html, svg or text");
    if (out === undefined && format === "html" && io.isTTY === true) {
      throw new UsageError("the HTML page is not written to a terminal: give -o FILE.html, redirect stdout, or use --format text");
    }
    if (out !== undefined) checkWritableFile(out, "-o");
    const file = args.positionals[0]!;
    const plan = loadPlanOrReport(file, io);
    if (!plan) return 1;
    let measured: MeasuredStep | undefined;
    if (tracePath !== undefined) {
      measured = readTrace(tracePath, plan, step, io);
      if (!measured) return 1;
    }
    const text = RENDERERS[format](buildViewModel(plan, measured ? { measured } : {}));
    if (out === undefined) {
      io.stdout(text);
      return 0;
    }
    try {
      const bytes = writeAtomically(out, text);
      io.stdout(`wrote ${out} (${format}, ${formatBytes(bytes)})\n`);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (typeof err.code !== "string") throw e;
      io.stderr(`${out}: error: cannot write: ${err.code}\n`);
      return 1;
    }
    return 0;
  },
};

function formatOf(given: string | undefined, out: string | undefined): Format {
  if (given !== undefined) {
    if (!(FORMATS as readonly string[]).includes(given)) throw new UsageError(`--format must be one of ${FORMATS.join(", ")}, got '${given}'`);
    return given as Format;
  }
  return (out !== undefined ? BY_EXTENSION[extname(out).toLowerCase()] : undefined) ?? "html";
}

/** The trace's chosen step, or undefined after reporting why it cannot be drawn for this plan. */
function readTrace(path: string, plan: Plan, step: number | undefined, io: CliIO): MeasuredStep | undefined {
  let text: string;
  try {
    // Only a regular file: a FIFO would block the read.
    const fd = openRegularFile(path, "--trace");
    try {
      text = readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    const why = e instanceof PathError ? e.reason : ((e as NodeJS.ErrnoException).code ?? (e as Error).message);
    io.stderr(`${path}: error: cannot read the trace: ${why}\n`);
    return undefined;
  }
  try {
    return measuredStep(parseTrace(text), plan.cluster.devices, step);
  } catch (e) {
    if (!(e instanceof TraceError)) throw e;
    io.stderr(`${path}: error: ${e.message}\n`);
    return undefined;
  }
}
