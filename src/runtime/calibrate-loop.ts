// The run loop's whole step on devices that compute nothing, for `fsm calibrate`: what a step of N virtual
// devices costs the host around its programs. Measured as one piece, the way run-loop.ts and cluster-engine.ts
// drive a step (each device fed its replica's rows, the run started, the next batch made while it runs, the
// losses read back), because its parts do not add up: timed apart (a tight loop of empty runs for the
// executor's start and finish, the feeding alone, the batch alone), the executor's part was bimodal (22–68 µs
// for one device over five calibrations: its threads were still yielding, or already asleep, when the next
// run came), and on 2 cores the batch made while 2 or 4 devices run takes a core they need, which no sum of
// the parts shows. Measured so, mlp's empty step was 71–74 µs on 1 device, 83–89 on 2 and 87–90 on 4 over four
// calibrations. Both ways the run loop may take a step (src/runtime/step-mode.ts): overlapped, the next batch
// made while the devices run; blocking, the run on the loop's own thread and the batch after it.
import { availableParallelism } from "node:os";
import type { Batch } from "../interp/session.js";
import { concreteShape } from "../interp/run.js";
import type { Graph } from "../graph/graph.js";
import { isFloatDType } from "../graph/types.js";
import { COMPUTE, DeviceBuilder } from "../lower/device-program.js";
import type { DeviceSlots } from "../lower/param-pieces.js";
import { createNativeCluster } from "../native/binding.js";
import { feedBatch, lossValues, mean, type FedProgram } from "./cluster-step.js";
import { median } from "./calibrate-comm.js";
import { hostThreadsFor } from "./world.js";

export interface LoopTiming {
  /** The whole empty step by device count (HostOverhead.step). */
  readonly step: { devices: number; seconds: number }[];
  /** The same, the step run on the loop's thread and the next batch made after it (HostOverhead.blockingStep). */
  readonly blockingStep: { devices: number; seconds: number }[];
  /** Of it, feeding the devices and reading the losses, at one device. */
  readonly loopSeconds: number;
  /** Making one batch (median over every count). */
  readonly batchSeconds: number;
}

/** Steps a block records, after WARM_STEPS unrecorded: a fresh block's first steps find the executor's
 *  threads asleep since the last block, and its first few dozen steps ever run unoptimized JavaScript. */
const BLOCK_STEPS = 100;
const WARM_STEPS = 30;

/** For each device count N: N devices, each with input slots for one micro-batch of ⌊batch / N⌋ rows (a
 *  data-parallel plan's replicas, one micro-batch each; the rows N does not divide are left out, a few rows'
 *  copy) and a loss slot, running one one-element copy; stepped in `blocks` blocks per count, interleaved
 *  across counts (a shared machine's bursts of other work land on every count alike), with the host threads
 *  and kernel threads a run of N devices gets. */
export async function measureLoop(g: Graph, batchOf: (step: number) => Batch, batch: number, seq: number | null, counts: readonly number[], blocks: number): Promise<LoopTiming> {
  const cores = availableParallelism();
  const rigs = counts.map((n) => {
    const rows = Math.max(1, Math.floor(batch / n));
    const bindings: Record<string, number> = seq === null ? { B: rows } : { B: rows, S: seq };
    const inputs: FedProgram["inputs"][number][] = [];
    const lossSlots: FedProgram["lossSlots"][number][] = [];
    const devices = Array.from({ length: n }, (_, d) => {
      const b = new DeviceBuilder();
      const named: Record<string, number> = {};
      for (const t of g.inputs()) {
        const { name, type } = g.tensor(t);
        named[name] = b.pin(b.slot(concreteShape(type.shape, bindings), isFloatDType(type.dtype) ? "f32" : "i32"));
      }
      const loss = b.pin(b.slot([1]));
      b.emit(COMPUTE, "fsm_copy", [loss], [loss], {}, "calibrate", { inPlace: true });
      // Past a batch smaller than the device count, a device is fed nothing (as a pipeline's later stages).
      inputs.push({ replica: d, slots: [(d + 1) * rows <= batch ? named : {}] });
      lossSlots.push({ replica: d, mb: 0, device: d, slot: loss });
      return b.finish();
    });
    const fed: FedProgram = { ranks: devices.map((_, d) => d), inputs, lossSlots };
    const cluster = createNativeCluster({ devices, blasThreads: Math.max(1, Math.floor(cores / n)), timeoutSeconds: 60, hostThreads: hostThreadsFor(n) });
    const slots: DeviceSlots = { set: (d, slot, data) => cluster.set(d, slot, data), get: (d, slot) => cluster.get(d, slot) };
    return { n, rows, cluster, slots, fed, steps: [] as number[], blocking: [] as number[], loops: [] as number[], batches: [] as number[] };
  });
  let step = 0;
  let next = batchOf(step++);
  /** One step of rig r as run-loop.ts takes it in that mode; its seconds, and (overlapped) its feeding and
   *  losses' and its batch's. */
  const stepOf = async (r: (typeof rigs)[number], blocking: boolean): Promise<{ wall: number; loop: number; batch: number }> => {
    const t0 = performance.now();
    feedBatch(r.slots, r.fed, next, 1, r.rows);
    const running = blocking ? r.cluster.runSync(false) : r.cluster.run(false);
    const t1 = performance.now();
    next = batchOf(step++);
    const t2 = performance.now();
    await running;
    const t3 = performance.now();
    mean(lossValues(r.slots, r.fed));
    const t4 = performance.now();
    // A blocking step's turn of the event loop, for signals.
    if (blocking) await new Promise((resolve) => setImmediate(resolve));
    return { wall: (performance.now() - t0) / 1000, loop: (t1 - t0 + (t4 - t3)) / 1000, batch: (t2 - t1) / 1000 };
  };
  for (let block = 0; block < blocks; block++) {
    for (const r of rigs) {
      for (const blocking of [false, true]) {
        for (let s = 0; s < WARM_STEPS + BLOCK_STEPS; s++) {
          const t = await stepOf(r, blocking);
          if (s < WARM_STEPS) continue;
          (blocking ? r.blocking : r.steps).push(t.wall);
          if (blocking) continue;
          r.loops.push(t.loop);
          r.batches.push(t.batch);
        }
      }
    }
  }
  return {
    step: rigs.map((r) => ({ devices: r.n, seconds: median(r.steps) })),
    blockingStep: rigs.map((r) => ({ devices: r.n, seconds: median(r.blocking) })),
    loopSeconds: median(rigs[0]!.loops),
    batchSeconds: median(rigs.flatMap((r) => r.batches)),
  };
}
