// Driving a lowered step on any executor with device-slot access (the native executor or the sequential
// reference, cluster-reference.ts): each replica's slice of the batch fed to its devices, losses read back.
import type { Batch } from "../interp/session.js";
import type { ClusterProgram } from "../lower/lower.js";
import type { DeviceSlots } from "../lower/param-pieces.js";
import { sliceBatch } from "./reference-step.js";

/** What feeding a step and reading its losses need of a lowered program (calibrate-loop.ts builds one
 *  around devices that compute nothing). */
export type FedProgram = Pick<ClusterProgram, "ranks" | "inputs" | "lossSlots">;

/** Feeds replica r's micro-batch j rows (r·m + j, as the 1-device plan orders them) to every device; `batch`
 *  holds the global batch's rows from `firstRow` on (a process's share; 0: the whole batch). */
export function feedBatch(cluster: DeviceSlots, program: FedProgram, batch: Batch, microBatches: number, microBatchSize: number, firstRow = 0): void {
  program.inputs.forEach(({ replica, slots }, i) => {
    const device = program.ranks[i]!;
    slots.forEach((named, j) => {
      const names = Object.keys(named);
      if (names.length === 0) return;
      const rows = sliceBatch(batch, (replica * microBatches + j) * microBatchSize - firstRow, microBatchSize);
      for (const name of names) {
        if (!rows[name]) throw new Error(`the batch has no value for input '${name}'`);
        cluster.set(device, named[name]!, rows[name]!.data as Float32Array | Int32Array);
      }
    });
  });
}

/** The loss of every (replica, micro-batch), replica-major. */
export function lossValues(cluster: DeviceSlots, program: FedProgram): number[] {
  return program.lossSlots.map(({ device, slot }) => cluster.get(device, slot)[0]!);
}

/** The mean loss over every replica and micro-batch, summed in replica-major order. */
export function meanLoss(cluster: DeviceSlots, program: ClusterProgram): number {
  return mean(lossValues(cluster, program));
}

export function mean(losses: readonly number[]): number {
  let sum = 0;
  for (const l of losses) sum += l;
  return sum / losses.length;
}
