// Every kernel by op name: the interpreter's one table, checked against the registry by the tests.
import { attentionKernels } from "./attention.js";
import { elementwiseKernels } from "./elementwise.js";
import { embeddingKernels } from "./embedding.js";
import type { Kernel } from "./kernel.js";
import { layoutKernels } from "./layout.js";
import { lossKernels } from "./loss.js";
import { matmulKernels } from "./matmul.js";
import { normKernels } from "./norm.js";
import { optimizerKernels } from "./optimizer.js";
import { softmaxKernels } from "./softmax.js";
import { tensorParallelKernels } from "./tensor-parallel.js";

export const KERNELS: Readonly<Record<string, Kernel>> = {
  ...attentionKernels,
  ...elementwiseKernels,
  ...embeddingKernels,
  ...layoutKernels,
  ...lossKernels,
  ...matmulKernels,
  ...normKernels,
  ...optimizerKernels,
  ...softmaxKernels,
  ...tensorParallelKernels,
};

export function kernelFor(op: string): Kernel {
  const k = KERNELS[op];
  if (!k) throw new Error(`not implemented: interpreter kernel for op '${op}'`);
  return k;
}
