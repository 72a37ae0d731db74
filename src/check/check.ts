// The front end in processing order: load + parse (with imports) → collect declarations → elaborate the
// model → build the forward graph → check train/parallel settings. Returns every diagnostic and, when the
// file is clean, the checked model (graph IR + typed settings).
import { hasErrors, sortDiagnostics, type Diagnostic } from "../diagnostics/diagnostic.js";
import { error } from "../diagnostics/diagnostic.js";
import type { Graph } from "../graph/graph.js";
import { verifyGraph } from "../graph/verify.js";
import { tensorParallelProblems } from "../graph/tensor-parallel-problems.js";
import { GraphBuilder } from "./build-graph.js";
import { collectDeclarations, type Declarations } from "./collect.js";
import { evalExpr } from "./const-eval.js";
import { Elaborator } from "./elaborate.js";
import { LazyScope, Scope, type Env } from "./env.js";
import { loadProgram, nodeHost, type SourceHost } from "./load.js";
import { applyOverrides, parseOverrides } from "./overrides.js";
import { checkParallelFeasible } from "./parallel-feasibility.js";
import { checkBatchSplit, type SampleMixing } from "./batch-split.js";
import { checkPositionTables } from "./position-tables.js";
import { batchCoupling } from "../graph/batch-coupling.js";
import { checkParallel, checkTrain } from "./settings.js";
import type { ParallelConfig, TrainConfig } from "./settings-types.js";
import { SYMBOLIC_DIMS, symDim } from "../graph/dim.js";

export interface CheckOptions {
  readonly host?: SourceHost;
  /** `--set` overrides such as `parallel.shard=fsdp`. */
  readonly overrides?: readonly string[];
}

export interface CheckedModel {
  readonly name: string;
  readonly graph: Graph;
  /** Absent when the file has no train section (graph and cost still work; compiling needs it). */
  readonly train: TrainConfig | undefined;
  readonly parallel: ParallelConfig;
  /** Set when the loss mixes the samples of its batch: compile refuses plans that split the batch. */
  readonly sampleMixing?: SampleMixing;
}

export interface CheckResult {
  readonly diagnostics: readonly Diagnostic[];
  readonly sources: ReadonlyMap<string, string>;
  /** Set when there are no errors and the program has a model. */
  readonly model: CheckedModel | undefined;
  /** The files read, imports first. */
  readonly files: readonly string[];
}

export function checkFile(path: string, options: CheckOptions = {}): CheckResult {
  const program = loadProgram(path, options.host ?? nodeHost);
  const diags: Diagnostic[] = [...program.diagnostics];
  const overrides = parseOverrides(options.overrides ?? [], diags);
  const sources = new Map([...program.sources, ...overrides.sources]);
  const files = program.files.map((f) => f.path);
  const finish = (model: CheckedModel | undefined): CheckResult => ({
    diagnostics: sortDiagnostics(diags),
    sources,
    model: hasErrors(diags) ? undefined : model,
    files,
  });
  // Semantic checks on a recovered AST mostly echo the syntax errors: report those alone first.
  if (!program.root || hasErrors(diags)) return finish(undefined);

  const decls = collectDeclarations(program.files, diags);
  const globals = globalScope(decls, diags);
  const trainSection = applyOverrides(decls.train, overrides.train, "Train");
  const parallelSection = applyOverrides(decls.parallel, overrides.parallel, "Parallel");
  const parallel = checkParallel(diags, parallelSection, globals);
  if (!decls.model) {
    // A library of blocks is fine on its own; settings without a model are not.
    if (trainSection || parallelSection) {
      diags.push(error("FSM308", "train/parallel settings need a model in the program", (trainSection ?? parallelSection)!.keyword.span));
    }
    return finish(undefined);
  }

  const model = new Elaborator(diags, decls, globals).elaborateModel(decls.model);
  // layer_checkpoint = all: every layer of every repeat stack checkpointed, as if annotated @checkpoint.
  const builder = new GraphBuilder(diags, decls, model, decls.model.name.name, { checkpointStacks: parallel.config.layerCheckpoint === "all" });
  const built = builder.build();
  const graph = builder.graph;
  const usesSeq = graph.inputs().some((t) => graph.tensor(t).type.shape.some((d) => (d.syms.S ?? 0) > 0));
  const train = trainSection ? checkTrain(diags, trainSection, globals, usesSeq) : undefined;
  let sampleMixing: SampleMixing | undefined;
  if (built) {
    checkParallelFeasible(diags, parallel, parallelSection?.keyword.span ?? decls.model.name.span, graph.layers(), train?.config, (l) =>
      builder.layerSpans.get(l),
    );
    const problems = verifyGraph(graph);
    if (problems.length > 0) throw new Error(`internal: the graph built from ${path} fails verification:\n${problems.join("\n")}`);
    if (typeof parallel.config.tensorParallel === "number") {
      for (const p of tensorParallelProblems(graph, parallel.config.tensorParallel)) {
        diags.push(error("FSM507", p.message, builder.opSpans.get(p.op) ?? parallel.spans.get("tensor_parallel") ?? decls.model.name.span));
      }
    }
    if (train) {
      // B at its largest (one device, one micro-batch): the bound every plan's micro-batch stays within.
      checkPositionTables(diags, graph, builder.opSpans, { B: train.config.batch, ...(train.config.seq !== undefined && { S: train.config.seq }) });
    }
    const coupling = batchCoupling(graph);
    const span = coupling && builder.opSpans.get(coupling.op);
    if (coupling && span) {
      sampleMixing = { why: coupling.why, span };
      checkBatchSplit(diags, sampleMixing, parallel);
    }
  }
  return finish(
    built ? { name: decls.model.name.name, graph, train: train?.config, parallel: parallel.config, ...(sampleMixing && { sampleMixing }) } : undefined,
  );
}

/** File-level constants (lazily, so order across files does not matter) over the symbolic dims B and S. */
function globalScope(decls: Declarations, diags: Diagnostic[]): Env {
  const dims = new Scope();
  for (const s of SYMBOLIC_DIMS) dims.define(s, { k: "dim", d: symDim(s) });
  const scope: LazyScope = new LazyScope(
    decls.consts,
    (name, cycle) => {
      const c = decls.consts.get(name)!;
      if (cycle) {
        diags.push(error("FSM400", `constant '${name}' depends on itself`, c.name.span));
        return { k: "error" };
      }
      return evalExpr({ diags }, c.value, scope);
    },
    dims,
  );
  return scope;
}
