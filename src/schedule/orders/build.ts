// One entry point from schedule settings (name, p, m, v, checkpoint mode) to a compute order.
import { withCheckpointing } from "./checkpoint.js";
import { gpipeOrder } from "./gpipe.js";
import { interleavedOrder } from "./interleaved.js";
import { oneFOneBOrder } from "./one-f-one-b.js";
import type { CheckpointMode, ComputeOrder, ScheduleName } from "./order.js";
import { zeroBubbleOrder } from "./zero-bubble.js";

export interface ScheduleSpec {
  readonly schedule: ScheduleName;
  readonly ranks: number;
  readonly microBatches: number;
  /** Interleaved only (default 2); other schedules run one stage per rank and reject anything but 1. */
  readonly virtualStages?: number;
  readonly checkpoint?: CheckpointMode;
}

export function buildComputeOrder(spec: ScheduleSpec): ComputeOrder {
  const { schedule, ranks, microBatches } = spec;
  if (schedule !== "interleaved" && spec.virtualStages !== undefined && spec.virtualStages !== 1) {
    throw new Error(`schedule: ${schedule} runs one stage per rank; virtualStages=${spec.virtualStages} needs the interleaved schedule`);
  }
  let order: ComputeOrder;
  switch (schedule) {
    case "gpipe":
      order = gpipeOrder({ ranks, microBatches });
      break;
    case "1f1b":
      order = oneFOneBOrder({ ranks, microBatches });
      break;
    case "interleaved":
      order = interleavedOrder({ ranks, microBatches, virtualStages: spec.virtualStages ?? 2 });
      break;
    case "zero_bubble":
      order = zeroBubbleOrder({ ranks, microBatches });
      break;
  }
  return withCheckpointing(order, spec.checkpoint ?? "never");
}
