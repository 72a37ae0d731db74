// What an op's `cost` rule returns: FLOPs of its forward and backward (split into input- and weight-gradient
// parts, which zero-bubble schedules place separately) and the bytes its forward pass moves.
import type { SymbolName } from "./dim.js";
import type { Attrs, TensorType } from "./types.js";

/** Values of the symbolic dims, e.g. {B: 8, S: 1024}; every symbol a type uses must be bound. */
export type DimBindings = Readonly<Partial<Record<SymbolName, number>>>;

/** Which hardware unit bounds an op's arithmetic: `matrix` ops (matmuls) run at the dtype's tensor-core/GEMM
 *  peak; `vector` ops (elementwise, reductions, lookups) run on the ordinary fp32 vector units. */
export type ComputeUnit = "matrix" | "vector";

/** A collective an op runs inside its group (the tensor-parallel ops): which, how many bytes (the full
 *  buffer, as src/cost/collectives.ts counts it), in the op's forward or its backward. */
export interface OpCollective {
  readonly phase: "forward" | "backward";
  readonly kind: "all_reduce" | "all_gather" | "reduce_scatter";
  readonly bytes: number;
}

export interface OpCost {
  /** Forward FLOPs; a multiply-add counts as 2 (so a matmul is 2·m·n·k). */
  readonly forwardFlops: number;
  /** Backward FLOPs: `input` = gradients w.r.t. the op's tensor inputs (activations), `weight` = gradients
   *  w.r.t. its parameters. Both operands of matmul are activations, so all its backward is `input`. */
  readonly backwardFlops: { readonly input: number; readonly weight: number };
  /** Forward memory traffic in bytes, at the dtypes of the types the rule was given (the cost model passes
   *  bf16 types under mixed precision, so the same rule serves every precision). */
  readonly bytesRead: number;
  readonly bytesWritten: number;
  readonly unit: ComputeUnit;
  /** Communication the op waits for on the compute stream (Megatron's tensor-parallel collectives block the
   *  layer they sit in), among `groupSize` ranks of one node; absent for ops that only compute. */
  readonly collectives?: { readonly groupSize: number; readonly list: readonly OpCollective[] };
}

/** An op's cost rule: input types in operand order (for module ops the tensor inputs, then the parameters in
 *  `params()` order), attributes with declared defaults filled in, and the symbol values to evaluate at. */
export type OpCostRule = (inputs: readonly TensorType[], attrs: Attrs, bindings: DimBindings) => OpCost;
