// Persistent model-state bytes per rank of a shard plan (weights, gradients, optimizer state), and how they
// relate to src/cost's ZeRO formula: equal but for FSDP padding or an uneven OSS/ShardedDDP partition.
import type { Optimizer, Precision, ShardStrategy } from "../check/settings-types.js";
import { modelStateBytes, type OptimizerSpec, type StateBytesPerParam } from "../cost/memory.js";
import type { RankStateBytes, ShardMemory } from "./types.js";

/** Bytes per element of the state a strategy shards (the rest is replicated on every rank). */
export function shardedBytesPerElement(strategy: ShardStrategy, b: StateBytesPerParam): number {
  switch (strategy) {
    case "none":
      return 0;
    case "oss":
      return b.optimizer;
    case "sddp":
      return b.grad + b.optimizer;
    case "fsdp":
      return b.param + b.grad + b.optimizer;
  }
}

/**
 * `psi` parameters in the stage; `shardedElements[r]` the elements whose sharded state rank r keeps (its OSS
 * partition, or the sum of its FSDP shards with padding; ignored for none). Replicated state costs every
 * rank its bytes for all psi elements.
 */
export function shardMemory(
  strategy: ShardStrategy,
  b: StateBytesPerParam,
  precision: Precision,
  optimizer: OptimizerSpec | Optimizer,
  reduceDtype: Precision,
  psi: number,
  shardedElements: readonly number[],
  /** Ranks the state is split over: the group, or an FSDP shard group under hybrid sharding. */
  shardOver = shardedElements.length,
): ShardMemory {
  const n = shardOver;
  const own = (r: number): number => (strategy === "none" ? psi : shardedElements[r]!);
  const perRank: RankStateBytes[] = shardedElements.map((_, r) => {
    const param = b.param * (strategy === "fsdp" ? own(r) : psi);
    const grad = b.grad * (strategy === "fsdp" || strategy === "sddp" ? own(r) : psi);
    const opt = b.optimizer * (strategy === "none" ? psi : own(r));
    return { param, grad, optimizer: opt, total: param + grad + opt };
  });
  const largest = strategy === "none" ? Math.ceil(psi / n) : Math.max(...shardedElements);
  return {
    perRank,
    maxTotal: Math.max(...perRank.map((x) => x.total)),
    zeroFormula: modelStateBytes(psi, n, strategy, precision, optimizer, reduceDtype),
    excessElements: largest - Math.ceil(psi / n),
    shardedBytesPerElement: shardedBytesPerElement(strategy, b),
  };
}
