// A model whose loss mixes the samples of its batch (src/graph/batch-coupling.ts) trains a different model
// when a plan splits the batch over data-parallel replicas or micro-batches. Where the parallel settings
// already split it, that is an error here; otherwise a warning, and compile refuses a plan that splits it
// (`--devices` is known only there).
import { error, warning, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type { CheckedParallel } from "./settings.js";

/** What the checked model carries to compile: why and where its loss mixes samples. */
export interface SampleMixing {
  readonly why: string;
  readonly span: Span;
}

export function checkBatchSplit(diags: Diagnostic[], mixing: SampleMixing, p: CheckedParallel): void {
  const split = splittingSetting(p);
  if (split) {
    const at = p.spans.get(split.key);
    diags.push(
      error("FSM506", `${mixing.why}: ${split.text} splits the batch, so each part would be trained on only its own samples`, mixing.span, [
        `${split.text}${at ? ` is set at ${at.file}:${at.line}:${at.column}` : ""}; a model that mixes samples trains only with data_parallel = 1 and chunks = 1`,
      ]),
    );
  } else {
    diags.push(warning("FSM506", `${mixing.why}: a plan that splits the batch (data parallelism, or chunks > 1) will be refused`, mixing.span));
  }
}

/** The parallel setting that splits the batch, if one does. */
function splittingSetting(p: CheckedParallel): { key: string; text: string } | undefined {
  const c = p.config;
  if (typeof c.dataParallel === "number" && c.dataParallel > 1) return { key: "data_parallel", text: `data_parallel = ${c.dataParallel}` };
  if (typeof c.chunks === "number" && c.chunks > 1) return { key: "chunks", text: `chunks = ${c.chunks}` };
  if (typeof c.devices === "number" && typeof c.stages === "number" && c.devices > c.stages) {
    return { key: "devices", text: `devices = ${c.devices} over stages = ${c.stages} (${c.devices / c.stages} data-parallel replicas)` };
  }
  return undefined;
}

/** Compile's refusal of a plan that splits the batch of a model that mixes samples; undefined when it does not split. */
export function batchSplitRefusal(mixing: SampleMixing, dataParallel: number, microBatches: number): string | undefined {
  if (dataParallel * microBatches <= 1) return undefined;
  const { file, line, column } = mixing.span;
  const parts = `${dataParallel} data-parallel replica${dataParallel === 1 ? "" : "s"} × ${microBatches} micro-batch${microBatches === 1 ? "" : "es"}`;
  return `${file}:${line}:${column}: ${mixing.why}: the plan's ${parts} would each train on only its own samples, a different model than the full batch; plan it with data_parallel = 1 and chunks = 1 (and no more devices than pipeline stages), or keep the samples apart`;
}
