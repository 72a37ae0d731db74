// `fsm run --init weights.safetensors`: starting weights from a file (e.g. one `fsm consolidate` wrote)
// instead of the seed's initialisation. Every parameter must be there, by its path, as F32 of its shape;
// anything else is refused with the whole list of what is missing, unexpected or mis-shaped at once.
import type { Graph } from "../graph/graph.js";
import { numel } from "../graph/dim.js";
import { wholeShape } from "../graph/param-split.js";
import type { FloatTensor } from "../interp/tensor.js";
import { CheckpointError } from "./manifest.js";
import { readSafetensors, SafetensorsError } from "./safetensors.js";

/** Replaces `params`' values by the file's (names and shapes checked first). */
export function initFromFile(path: string, g: Graph, params: Map<string, FloatTensor>): void {
  let tensors;
  try {
    tensors = readSafetensors(path).tensors;
  } catch (e) {
    if (e instanceof SafetensorsError) throw new CheckpointError(e.message);
    throw e;
  }
  const problems: string[] = [];
  // A tensor-parallel graph holds a rank's slice of a split parameter; the file has the model's whole one,
  // which each rank's slice is cut from (as from the seed's initialisation).
  const expected = new Map(g.params().map((p) => {
    const shape = p.type.shape.map((d) => numel([d]));
    return [p.name, p.split ? wholeShape(shape, p.split) : shape];
  }));
  for (const [name, shape] of expected) {
    const t = tensors.get(name);
    if (!t) problems.push(`missing ${name} [${shape.join(", ")}]`);
    else if (t.dtype !== "F32" || t.shape.length !== shape.length || t.shape.some((n, i) => n !== shape[i])) problems.push(`mis-shaped ${name}: ${t.dtype}[${t.shape.join(", ")}], the model's is F32[${shape.join(", ")}]`);
  }
  // Optimizer state saved beside the weights (consolidate --optimizer) is not weights: ignored, not unexpected.
  const roles = /\.(exp_avg|exp_avg_sq|momentum)$/;
  for (const name of tensors.keys()) if (!expected.has(name) && !roles.test(name)) problems.push(`unexpected ${name}`);
  if (problems.length > 0) throw new CheckpointError(`${path} does not fit model ${g.model}: ${problems.join("; ")}`);
  for (const name of expected.keys()) {
    const t = tensors.get(name)!;
    params.set(name, { shape: [...t.shape], data: new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength)) });
  }
}
