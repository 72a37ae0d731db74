// A model too large for the JavaScript heap is refused before compile builds its training graph, with the
// heap it would need, instead of V8 aborting the process minutes later ("FATAL ERROR: Reached heap limit",
// which no handler can catch). Compile holds the forward graph, the training graph (about six ops per forward
// op of a transformer), the search's tables and the plan document at once: gpt-tiny peaks at about 22 KiB of
// heap per forward op (5,000 layers: 40k forward ops, 0.9 GiB; 20,000 layers: 3.6 GiB; 100,000 layers ran
// out of a 4 GiB heap after two minutes).
import { getHeapStatistics } from "node:v8";
import { CompileError } from "./errors.js";

const HEAP_BYTES_PER_FORWARD_OP = 22 * 1024;

/** Throws a CompileError when compiling a forward graph of `forwardOps` ops needs more than `heapLimit`. */
export function checkHeapRoom(model: string, forwardOps: number, heapLimit = getHeapStatistics().heap_size_limit): void {
  const needed = forwardOps * HEAP_BYTES_PER_FORWARD_OP;
  if (needed <= heapLimit) return;
  const gib = (n: number): string => `${(n / 2 ** 30).toFixed(1)} GiB`;
  // node's flag takes megabytes; a quarter more than the estimate, in whole GiB.
  const suggested = Math.ceil((1.25 * needed) / 2 ** 30) * 1024;
  throw new CompileError(
    `model ${model} has ${forwardOps.toLocaleString("en-US")} forward ops: compiling it needs about ${gib(needed)} of JavaScript heap and this process has ${gib(heapLimit)}; ` +
      `give node more (NODE_OPTIONS=--max-old-space-size=${suggested}) or compile fewer layers`,
  );
}
